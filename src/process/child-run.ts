// What every child does once it has its StartMessage, whichever way it was started: load
// the target, call fn(i, ...args), and turn any failure into one ErrorMessage. Shared by
// child-process.ts and child-thread.ts; kept small because it runs before the user's code
// on every start (the W2 yardstick counts it).
import { decodeArgs } from './args.js';
import { markLoading } from './bootstrap.js';
// Imported up front, not lazily on failure: a thread may be terminated at any moment after
// it failed, and a worker terminated while its module loader has a file open leaks that
// descriptor (a Node limitation).
import { errorMessage } from './error-payload.js';
import type { ErrorMessage, StartMessage } from './messages.js';

type Loader = (url: string) => Promise<Record<string, unknown>>;

/**
 * Runs the target. `report` is called at most once, for the first error: a throw or
 * rejection of fn, or an uncaught exception or unhandled rejection while the child lives
 * (torch forwards only fn's exception, but in Node an error in a callback fn started is
 * just as much the child's failure).
 */
export async function runTarget(
  start: StartMessage,
  fds: number[],
  report: (message: ErrorMessage) => void,
  load: Loader = (url) => import(url),
  onLoaded: () => void = () => {},
  onArgs: () => void = () => {},
): Promise<void> {
  let reported = false;
  const fail = (e: unknown): void => {
    if (reported) return;
    reported = true;
    report(errorMessage(e));
  };
  process.on('uncaughtException', fail);
  process.on('unhandledRejection', fail);
  try {
    let ns: Record<string, unknown>;
    markLoading(start.module); // NOTE [Starting processes while loading]
    try {
      ns = await load(start.module);
    } finally {
      markLoading(null);
    }
    const fn = ns[start.exportName];
    if (typeof fn !== 'function') throw new TypeError(`${start.module} export '${start.exportName}' is not a function in the child`);
    let args: unknown[];
    try {
      args = await decodeArgs(start.args, fds); // may import the transport
    } finally {
      onArgs(); // a thread child has its own descriptors now (NOTE [Spawn arguments])
    }
    onLoaded(); // every import of the start is done: stopping the thread now cuts none short
    await fn(start.index, ...args);
  } catch (e) {
    fail(e);
  }
}

