// NOTE [Turning the event loop]
// A dataset whose getItem is synchronous makes a loading loop (`for await (const b of
// loader)` in the main process, a worker's loop over its inbox when tasks are waiting) a
// loop of microtasks only: timers, I/O and finalizers wait until it ends. Finalizers are
// what give a collected tensor's segment back to the cache (NOTE [Lease buffers and the
// finalizer]), so without a turn every batch (or shared sample) dropped without a release
// makes a new segment: measured, 37 ms a batch of 32x3x224x224 instead of 1.6. The loops
// therefore let the event loop turn (setImmediate) once a millisecond of loading has passed
// since the last turn: batches that take longer pay a few microseconds each, a stream of
// tiny ones nothing measurable.
const TURN_MS = 1;

/** A function to await after each batch: it turns the event loop when TURN_MS have passed since the last turn. */
export function loopTurner(): () => Promise<void> | void {
  let last = performance.now();
  return () => {
    if (performance.now() - last < TURN_MS) return;
    return new Promise<void>((resolve) => setImmediate(() => {
      last = performance.now();
      resolve();
    }));
  };
}
