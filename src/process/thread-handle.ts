// A child started as a worker thread (startMethod 'thread'). Same semantics as a process
// child, with two stand-ins: the "pid" is the worker's threadId, and a signal is a stop the
// parent asks of the thread (a thread cannot be signalled alone), reported as that signal.
//
// NOTE [Stopping a thread child]
// Threads share their process's descriptor table, and a worker ended by worker.terminate()
// runs no 'exit' handler: the queues, pipe ends, events and segments it held would stay open
// in the process for good (a killed process leaves nothing behind only because the kernel
// closes its descriptors). So SIGTERM and every other catchable signal become a StopMessage,
// on which the thread calls process.exit(): its exit handlers close what it holds (lifetime.ts,
// allocator.ts, spawn.ts), as a process's death would. A thread that cannot take the message
// (a synchronous loop) is terminated STOP_GRACE_MS later, and SIGKILL terminates at once:
// like a SIGKILLed process it then cleans up nothing, and what it held stays open.
import { Worker } from 'node:worker_threads';
import { systemError } from '../native/index.js';
import { checkDescriptors, workerStartError } from './start-fds.js';
import { ChildHandle } from './child-handle.js';
import { errorMessage } from './error-payload.js';
import { EXIT_STOPPED, type ChildMessage, type StartMessage, type StopMessage, type ThreadStartMessage } from './messages.js';

const LOAD_GRACE_MS = 2000;
/** How long a stopped thread may take to run its exit handlers before it is terminated. */
const STOP_GRACE_MS = 1000;

// When tensorproc itself runs from its TypeScript sources (under tsx), the thread bootstrap
// is a .ts file, which a worker cannot load on Node 20 before a loader is installed in it:
// this plain-JS stub installs the parent's loader API (StartMessage.preload) if needed, then
// loads the bootstrap. Compiled tensorproc never needs it.
const TS_ENTRY_STUB = `
const { workerData } = require('node:worker_threads');
const entry = process.argv[2];
import(entry).catch(async (e) => {
  if (e?.code !== 'ERR_UNKNOWN_FILE_EXTENSION' || !workerData.preload) throw e;
  const api = await import(workerData.preload);
  (api.register ?? api.default?.register)();
  await import(entry + '?loader'); // a new URL: the failed load of the old one is cached
});
`;

export class ThreadChild extends ChildHandle {
  readonly startMethod = 'thread' as const;
  readonly pid: number;
  readonly #worker: Worker;
  #killedWith: NodeJS.Signals | null = null;
  #loaded = false;
  #stopAsked = false;
  #terminated = false;
  #argsTaken!: () => void;
  /** Settles once the thread has its own copies of its argument descriptors, or has exited. */
  readonly argsTaken = new Promise<void>((resolve) => (this.#argsTaken = resolve));

  constructor(start: StartMessage, options: { entry: URL; daemon: boolean; env: NodeJS.ProcessEnv }, onExit: (child: ChildHandle) => void) {
    super(start.index, start.identity.name, onExit);
    const exitState = new Int32Array(new SharedArrayBuffer(4));
    const workerData: ThreadStartMessage = { ...start, exitState };
    const { env } = options;
    const what = `starting thread ${start.identity.name}`;
    checkDescriptors(2, what);
    let worker: Worker;
    try {
      worker = options.entry.pathname.endsWith('.ts')
        ? new Worker(TS_ENTRY_STUB, { eval: true, argv: [options.entry.href], workerData, env })
        : new Worker(options.entry, { workerData, env });
    } catch (e) {
      throw workerStartError(e, what);
    }
    this.#worker = worker;
    this.pid = worker.threadId;
    worker.on('message', (m: ChildMessage) => {
      if (m?.kind === 'error') this.error ??= m;
      if (m?.kind === 'args') this.#argsTaken();
      if (m?.kind === 'loaded') {
        this.#loaded = true;
        this.targetLoaded();
        if (this.#killedWith) this.#end();
      }
    });
    // An error outside fn that the bootstrap could not catch (it failed to load, say), or
    // a thread that could not be started at all (it then exits with code 0).
    worker.on('error', (e) => {
      const code = (e as { code?: string }).code;
      // Out of descriptors while the thread loads its bootstrap (its loader reads many files
      // at once) is a failed start too, as for a process that could not be started.
      const started = code !== 'ERR_WORKER_INIT_FAILED' && !(!this.#loaded && (code === 'EMFILE' || code === 'ENFILE'));
      if (started) this.error ??= errorMessage(e);
      else this.startError ??= code === 'ERR_WORKER_INIT_FAILED' ? workerStartError(e, what) : systemError(e, what);
    });
    worker.once('online', () => this.running());
    worker.once('exit', (code) => {
      this.#argsTaken();
      // A signal is reported only for an exit it caused: a thread that ended on its own just
      // before kill() reached it exited with its own code, as a process signalled as a zombie.
      const how = Atomics.load(exitState, 0);
      const signalled = this.#killedWith !== null && (how === EXIT_STOPPED || (how === 0 && this.#terminated));
      this.finish(signalled ? null : this.startError ? 127 : code, signalled ? this.#killedWith : null);
    });
    if (options.daemon) worker.unref();
  }

  kill(signal: NodeJS.Signals = 'SIGTERM'): void {
    if (!this.isAlive() || this.#killedWith === 'SIGKILL') return;
    const first = this.#killedWith === null;
    // The last signal asked is the one reported: SIGKILL after an unheeded SIGTERM, as for a process.
    this.#killedWith = signal;
    // A worker ended while its module loader has a file open leaks that descriptor (a Node
    // limitation), so a thread still loading its target is stopped once it has loaded, or
    // terminated after LOAD_GRACE_MS if loading hangs.
    if (this.#loaded) this.#end();
    else if (first) setTimeout(() => this.#terminate(), LOAD_GRACE_MS).unref();
  }

  #terminate(): void {
    if (!this.isAlive()) return;
    this.#terminated = true;
    void this.#worker.terminate();
  }

  /** Ends the thread as #killedWith asks (NOTE [Stopping a thread child]). */
  #end(): void {
    if (this.#killedWith === 'SIGKILL') {
      this.#terminate();
      return;
    }
    if (this.#stopAsked) return;
    this.#stopAsked = true;
    this.#worker.postMessage({ kind: 'stop' } satisfies StopMessage);
    setTimeout(() => this.#terminate(), STOP_GRACE_MS).unref();
  }

  setRef(ref: boolean): void {
    if (ref) this.#worker.ref();
    else this.#worker.unref();
  }
}
