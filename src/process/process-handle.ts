// A child started as a fresh Node process (startMethod 'spawn').
//
// NOTE [No orphans]
// A process child must not outlive its parent, even a parent killed with SIGKILL. The child
// asks the kernel for SIGKILL when its parent dies (PR_SET_PDEATHSIG) as the first thing it
// does, then checks getppid() against the pid we pass in the environment, which catches a
// parent that died before the prctl. The kernel sends the signal when the *thread* that
// forked exits: children started from a worker thread die with that thread. As a second
// line, the child watches its control channel and exits at end of stream. `daemon` children
// are unref'd here so they never keep the parent alive; they die with it by the same means.
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { addon, systemError } from '../native/index.js';
import { ChannelReader, sendFrames } from './channel-io.js';
import { ChildHandle } from './child-handle.js';
import { channelPair } from './start-fds.js';
import { toFrames, type ChildMessage, type StartMessage } from './messages.js';

export class ProcessChild extends ChildHandle {
  readonly startMethod = 'spawn' as const;
  readonly #child: ChildProcess;

  constructor(
    start: StartMessage,
    options: { entry: URL; execArgv: string[]; daemon: boolean; argFds: number[]; env: NodeJS.ProcessEnv },
    onExit: (child: ChildHandle) => void,
  ) {
    super(start.index, start.identity.name, onExit);
    const [parentEnd, childEnd] = channelPair(`starting process ${start.identity.name}`);
    let child: ChildProcess;
    let sent: Promise<void> = Promise.resolve();
    let reader: ChannelReader<ChildMessage> | null = null;
    // The one way parentEnd is let go: a start message still being pumped fails once the peer
    // is gone, and its poll must be closed before the descriptor is.
    const release = (): void => {
      reader?.close();
      void sent.catch(() => {}).finally(() => addon.close(parentEnd));
    };
    try {
      // Written before the child starts: it finds the message waiting (most fit the socket
      // buffer at once; a larger one is pumped as the child reads).
      sent = sendFrames(parentEnd, toFrames(start));
      child = spawn(process.execPath, [...options.execArgv, fileURLToPath(options.entry)], {
        // stdin is /dev/null, as Python's multiprocessing does: children must not compete
        // with the parent for its input. stdout and stderr are shared.
        stdio: ['ignore', 'inherit', 'inherit', childEnd, ...options.argFds],
        env: options.env,
      });
      const r = new ChannelReader<ChildMessage>(
        parentEnd,
        (m) => {
          if (m.kind === 'error') this.error ??= m;
          else if (m.kind === 'loaded') this.targetLoaded();
        },
        () => {},
      );
      // One poll per descriptor: read only once the start message is out. A child that dies
      // first makes the send fail; its exit is reported all the same.
      reader = r;
      sent.then(
        () => this.isAlive() && r.watch(false),
        () => {},
      );
      child.once('exit', (code, signal) => {
        r.drain(); // an error sent just before exiting is already in the socket
        release();
        this.finish(code, signal);
      });
      child.once('spawn', () => this.running());
      child.once('error', (e) => {
        // The process could not be started (EAGAIN: the process limit; ENOENT): a failed
        // child, which join() reports with this error.
        if (child.pid === undefined) {
          this.startError = systemError(e, `starting process ${start.identity.name}`);
          release();
          this.finish(127, null);
        }
      });
    } catch (e) {
      release();
      throw e;
    } finally {
      addon.close(childEnd);
    }
    this.#child = child;
    if (options.daemon) child.unref();
  }

  /** The OS pid; -1 for a process that could not be started. */
  get pid(): number {
    return this.#child.pid ?? -1;
  }

  kill(signal: NodeJS.Signals = 'SIGTERM'): void {
    if (this.isAlive()) this.#child.kill(signal);
  }

  setRef(ref: boolean): void {
    if (ref) this.#child.ref();
    else this.#child.unref();
  }
}
