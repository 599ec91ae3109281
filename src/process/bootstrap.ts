// NOTE [Starting processes while loading]
// A child imports its target module before it calls fn. A module that starts processes at
// its top level (an unguarded `spawn(...)`, often of itself) would do it again in each child,
// and each of those children would do it again: processes without end. torch refuses a
// process start while a child is still importing its main module; so does this: a child
// marks the import of its target (process/child-main.ts), and startProcesses() refuses to start
// anything meanwhile (spawn.ts, process.ts). The mark is per thread, as a thread child is a
// "process" of its own; it lives on globalThis, not in this module, because a process
// child runs a bundled copy of this module (NOTE [The process child's bundle]) beside the
// library's.
import { SpawnInBootstrapError } from '../errors.js';

const KEY = Symbol.for('tensorproc.loadingTarget');
type WithMark = typeof globalThis & { [KEY]?: string | null };

/** process/child-main.ts: `url` is being imported as this child's target; null once it is loaded. */
export function markLoading(url: string | null): void {
  (globalThis as WithMark)[KEY] = url;
}

/** Throws SpawnInBootstrapError while this child is still importing its target. */
export function checkNotLoading(): void {
  const loading = (globalThis as WithMark)[KEY] ?? null;
  if (loading === null) return;
  throw new SpawnInBootstrapError(
    `This child is still importing its target module (${loading}), and that import tried to start processes: ` +
      'code at the top level of the module starts them, and would start them again in every child. ' +
      "Move it into a function, or guard it as a program's main code: " +
      '`if (mp.parentProcess() === null) await main()` (torch: `if __name__ == "__main__"`; ' +
      '`isMainThread` is true in a process child too).',
  );
}
