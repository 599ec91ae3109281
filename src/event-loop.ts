// Giving the event loop a turn, for loops that would otherwise run on microtasks alone. Two
// policies, one concern: a count for queue operations that complete at once (settled), a
// clock for loading loops (loopTurner). Ground floor: used by transport/ and data/.
//
// NOTE [Letting the loop turn]
// A put, send or get that completes at once settles its promise in a microtask, and a loop
// that awaits nothing else (`while (!stop) { await q.put(x); await q.get(); }`) then never
// gives the event loop a turn: no timer fires, no I/O is read, the loop cannot be stopped
// from a timer or a signal handler. So every TURN_EVERY-th operation of a thread that
// completes at once settles through setImmediate instead, which lets the loop run its
// phases (timers come round at the next iteration). A stream that waits anyway turns the
// loop by itself; for one that never waits, one setImmediate per TURN_EVERY messages is a
// few nanoseconds a message.
const TURN_EVERY = 128;
let sinceTurn = 0;

/** A promise of `value`, settled now, or after a turn of the event loop now and then. */
export function settled<T>(value: T): Promise<T> {
  if (++sinceTurn < TURN_EVERY) return Promise.resolve(value);
  sinceTurn = 0;
  return new Promise((resolve) => setImmediate(resolve, value));
}

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
    return new Promise<void>((resolve) =>
      setImmediate(() => {
        last = performance.now();
        resolve();
      }),
    );
  };
}
