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
