// Stopping the workers that run an aborted call's chunks (pool/scheduler.ts).
//
// NOTE [Pool aborts]
// A call that no longer wants its chunks (aborted, failed, left early) bumps its slot's
// generation (NOTE [Pool control block]): its chunks still in the parent are dropped, and
// those a worker has not begun are skipped there. An abort also stops (SIGTERM, then
// SIGKILL) a worker that has begun one of its chunks, and starts another in its place; the
// chunks that worker held and had not begun go to other workers. So that stopping a worker
// costs no other call anything, a worker that holds chunks of a call with a signal is given
// no other call's chunks until those are back, and the worker sends the results it has
// before it begins such a call's chunks: when it is stopped, everything it held belongs to
// the aborted call, or was not begun.
import type { Call } from './calls.js';
import type { WorkerState } from './worker-state.js';

/** How long a worker stopped for an abort gets between SIGTERM and SIGKILL. */
const ABORT_KILL_MS = 1000;

/**
 * Stops each live worker whose progress word (`ctl[id]`) says it has begun a chunk of `call`;
 * `kill(id, signal)` signals worker `id`.
 */
export function stopRunning(
  call: Call,
  workers: readonly WorkerState[],
  ctl: Int32Array,
  kill: (id: number, signal: NodeJS.Signals) => void,
): void {
  for (let id = 0; id < workers.length; id++) {
    const w = workers[id]!;
    if (w.alive && w.holds(Atomics.load(ctl, id), call)) stopForAbort(id, w, kill);
  }
}

function stopForAbort(id: number, w: WorkerState, kill: (id: number, signal: NodeJS.Signals) => void): void {
  if (w.stoppedForAbort) return;
  w.stoppedForAbort = true;
  kill(id, 'SIGTERM');
  w.killTimer = setTimeout(() => {
    w.killTimer = null;
    if (w.alive) kill(id, 'SIGKILL');
  }, ABORT_KILL_MS).unref();
}
