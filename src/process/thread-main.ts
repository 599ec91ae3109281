// A thread child's bootstrap (startMethod 'thread'), run in a Worker from programs/thread-child.ts, or,
// in the package bundle, from its stub (NOTE [The package bundle]). The StartMessage is the
// workerData; the ErrorMessage goes back on parentPort, delivered before 'exit'.
import { onExit } from '../exit-hooks.js';
import { parentPort, threadId, workerData } from 'node:worker_threads';
import { runTarget } from './child-main.js';
// Loaded up front, where child-main.ts loads it on failure only: a thread may be terminated
// at any moment after it failed, and a worker terminated while its module loader has a file
// open leaks that descriptor (a Node limitation). Loaded, its import later opens nothing.
import './error-payload.js';
import { stopRunningChildren } from './child-handle.js';
import { EXIT_OWN, EXIT_STOPPED, STOP_EXIT_CODE, type ThreadStartMessage, type StopMessage } from './messages.js';

/** How long a stopped thread waits for its own children to stop (its parent terminates it after STOP_GRACE_MS). */
const CHILDREN_STOP_MS = 500;

/**
 * Runs this thread as a child; `entryPath`, the Worker's entry file, becomes its argv[1].
 * `loadReductions` loads every reduction, for arguments that carry tensorproc objects.
 */
export async function threadChildMain(entryPath: string, loadReductions: () => Promise<unknown>): Promise<void> {
  const start = workerData as ThreadStartMessage;
  // A worker's process.argv[1] is its parent's entry script: a program guarded by
  // `process.argv[1] === fileURLToPath(import.meta.url)` would run its main code again here.
  // As in a process child, argv[1] is the bootstrap.
  process.argv.splice(1, Infinity, entryPath);
  // How this thread ended, for its parent: on its own unless the stop below says otherwise.
  onExit(() => void Atomics.compareExchange(start.exitState, 0, 0, EXIT_OWN));

  // NOTE [Stopping a thread child]: SIGTERM's stand-in. The port must not keep the thread alive
  // by itself: a thread whose target has returned exits as a process would.
  parentPort!.on('message', (m: StopMessage) => {
    if (m?.kind !== 'stop') return;
    Atomics.store(start.exitState, 0, EXIT_STOPPED);
    // Its own children first: a worker's exit terminates the workers it started without their
    // exit handlers, and leaves what they held open in the process.
    void stopRunningChildren(CHILDREN_STOP_MS).then(() => process.exit(STOP_EXIT_CODE));
  });
  parentPort!.unref();

  // A TypeScript loader given with --import may decline to install itself in worker threads
  // (tsx does on Node 20). If the target then fails to load for its extension, install the
  // loader's API from here, as the parent found it, and try again.
  async function load(url: string): Promise<Record<string, unknown>> {
    try {
      return (await import(url)) as Record<string, unknown>;
    } catch (e) {
      if ((e as { code?: string }).code !== 'ERR_UNKNOWN_FILE_EXTENSION' || !start.preload) throw e;
      const api = (await import(start.preload)) as { register?: () => void; default?: { register?: () => void } };
      (api.register ?? api.default?.register)?.();
      // A new URL: Node caches the failed load of the old one.
      return (await import(`${url}${url.includes('?') ? '&' : '?'}loader`)) as Record<string, unknown>;
    }
  }

  await runTarget(start, 'thread', start.fds, {
    pid: threadId,
    borrowed: true,
    report: (message) => {
      // Stopping, the thread stopped its own children: what failed from that is not its error.
      if (Atomics.load(start.exitState, 0) !== EXIT_STOPPED) parentPort!.postMessage(message);
      process.exit(1);
    },
    load,
    loadReductions,
    onLoaded: () => parentPort!.postMessage({ kind: 'loaded' }),
    onArgs: () => parentPort!.postMessage({ kind: 'args' }),
  });
}
