// What every child does once it has its StartMessage, whichever way it was started: load and
// check its target (NOTE [Loading the target in the child]), decode its arguments, call it,
// and turn any failure into one ErrorMessage. Shared by programs/process-child.ts and
// programs/thread-child.ts; kept small because it runs before the user's code on every start (the
// W2 yardstick counts it).
import { decodeArgs } from './args.js';
import { markLoading } from './bootstrap.js';
import { setIdentity } from './current.js';
import type { ErrorMessage, StartMessage, StartMethod } from './messages.js';
import { loadTarget, type Loader } from './target-load.js';

export interface ChildHooks {
  /** This child's pid as its parent shows it: process.pid, or a thread's threadId. */
  pid: number;
  /** true in a thread child: the argument descriptors are its parent's, to be duplicated. */
  borrowed: boolean;
  /** Sends the first error, then exits with code 1. Called at most once. */
  report(message: ErrorMessage): void;
  load?: Loader;
  /**
   * Loads every reduction (src/programs/reductions.ts), for arguments that carry tensorproc
   * objects: the program that started this child passes it (NOTE [Spawn arguments]).
   */
  loadReductions(): Promise<unknown>;
  /** The arguments are decoded: a thread child has descriptors of its own now (NOTE [Spawn arguments]). */
  onArgs?(): void;
  /** Every import of the start is done (arguments and target): fn is called next. */
  onLoaded?(): void;
}

/**
 * Runs the target. `report` is called at most once, for the first error: a throw or
 * rejection of fn, or an uncaught exception or unhandled rejection while the child lives
 * (torch forwards only fn's exception, but in Node an error in a callback fn started is
 * just as much the child's failure).
 */
export async function runTarget(start: StartMessage, startMethod: StartMethod, fds: number[], hooks: ChildHooks): Promise<void> {
  let reported = false;
  const fail = (e: unknown, load = false): void => {
    if (reported) return;
    reported = true;
    // Loaded only now, so that a child that succeeds never loads it (W2 counts every module
    // a child loads); a thread child has it loaded already (thread-main.ts). The
    // path names its folder: the process bootstrap's bundle (src/programs/) imports it too.
    void import('../process/error-payload.js').then(
      ({ errorMessage }) => hooks.report(errorMessage(e, load)),
      // It cannot be loaded (no descriptor left to read it): the error's text, plainly.
      () => {
        const text = e instanceof Error ? String(e.stack) : `Uncaught ${String(e)}`;
        hooks.report({ kind: 'error', load, error: { name: 'Error', message: text, stack: text, fields: {} }, trace: text });
      },
    );
  };
  process.on('uncaughtException', (e) => fail(e));
  process.on('unhandledRejection', (e) => fail(e));
  setIdentity(start.identity, startMethod, hooks.pid); // NOTE [Process identity]: before the target's top-level code
  try {
    let fn: ((...a: unknown[]) => unknown) | null = null;
    let loadError: unknown = null;
    markLoading(start.module); // NOTE [Starting processes while loading]
    try {
      fn = await loadTarget(start.module, start.exportName, start.base, hooks.load ?? ((url) => import(url)), start.index);
    } catch (e) {
      loadError = e;
    } finally {
      markLoading(null);
    }
    // After the target: its module may register what the arguments need to be rebuilt (as
    // pickle imports a class's module). Decoded even when the target failed, so that this
    // child holds, and lets go of at its exit, the references they carried.
    let args: unknown[] = [];
    try {
      args = await decodeArgs(start.args, fds, hooks.borrowed, hooks.loadReductions); // may import the transport
    } catch (e) {
      if (fn) throw e;
    } finally {
      hooks.onArgs?.();
    }
    if (!fn) {
      fail(loadError, true);
      return;
    }
    hooks.onLoaded?.(); // stopping a thread now cuts no import short
    await (start.index === null ? fn(...args) : fn(start.index, ...args));
  } catch (e) {
    fail(e);
  }
}
