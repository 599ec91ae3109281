// JoinableQueue: Python's multiprocessing.JoinableQueue, a Queue whose consumers say when
// they are done with each item (taskDone()) and whose producers can wait until every item
// put is done (join()), in any process.
//
// NOTE [Unfinished tasks]
// CPython keeps the count of unfinished tasks in a semaphore and wakes join() through a
// condition, both under a lock. Here the count is a word of the queue's shared state
// (shared-words.ts, beside the slots of NOTE [Queue slots]), changed by atomic adds and a
// compare-and-swap, so a process killed at any point leaves nothing locked (it may leave the
// count one too high: a join() with a timeout then says false). put() counts its item before
// the message can reach any consumer (when it is called: a put waiting for a slot of a full
// queue counts too, and one that fails takes its count back), so a taskDone() for it can
// never find the count at zero. taskDone() takes one off, refusing to go below zero
// (TaskDoneTooManyError, Python's ValueError), and the one that brings it to zero bumps
// DONE, the word join() sleeps on (a futex, on a thread of the addon's own), and wakes the
// sleepers. join() reads DONE before it looks at the count: a taskDone() that empties the
// count after that look changes DONE, and the sleeper sees it changed and returns true, as
// a Python join() woken by notify_all() does even if a put came right after.
import { QueueClosedError, TaskDoneTooManyError } from '../errors.js';
import { registerReduction, timeoutOption } from '../transport/index.js';
import { Queue, queueParts, type TimeoutOptions } from './queue.js';

/** Items put and not yet done, in all processes (NOTE [Unfinished tasks]). */
const UNFINISHED = 32;
/** join() calls sleeping now, in all processes: taskDone() wakes only when some are. */
const JOINERS = 33;
/** Bumped each time UNFINISHED comes back to zero: what join() sleeps on. Its own cache line. */
const DONE = 48;
/** The longest one futex wait of join() lasts: close() must not leave a thread waiting for long. */
const SLICE_MS = 1000;

export class JoinableQueue<T = unknown> extends Queue<T> {
  /** Ends the current slice of each pending join() of this process (close()). */
  readonly #onClose = new Set<() => void>();

  /** As Queue.put(), and the item counts as unfinished until a taskDone() for it. */
  override put(obj: T, options?: TimeoutOptions): Promise<void> {
    if (this.isClosed()) return super.put(obj, options); // rejects, counting nothing
    const words = queueParts.words(this).words;
    Atomics.add(words, UNFINISHED, 1);
    return super.put(obj, options).catch((e: unknown) => {
      // Not put (a timeout, a value that cannot travel): not a task either. One that close()
      // rejected was taken back there.
      if (!this.isClosed()) this.#finish(words);
      throw e;
    });
  }

  /**
   * Python's task_done(): one item taken from the queue is done. Throws
   * TaskDoneTooManyError when every item put is done already.
   */
  taskDone(): void {
    if (this.isClosed()) throw new QueueClosedError('This queue was closed in this process; it cannot be used here any more.');
    const words = queueParts.words(this).words;
    if (!this.#finish(words)) {
      throw new TaskDoneTooManyError(
        'taskDone() was called more times than items were put on this queue: call it once for each item taken with get().',
      );
    }
  }

  /** Takes one unfinished task off; false if there was none. Wakes join() at zero. */
  #finish(words: Int32Array): boolean {
    for (;;) {
      const c = Atomics.load(words, UNFINISHED);
      if (c <= 0) return false;
      if (Atomics.compareExchange(words, UNFINISHED, c, c - 1) !== c) continue;
      if (c === 1) {
        Atomics.add(words, DONE, 1);
        if (Atomics.load(words, JOINERS) > 0) queueParts.words(this).wake(DONE);
      }
      return true;
    }
  }

  /** Items put and not yet done, in all processes (Python's `_unfinished_tasks` value). */
  get unfinishedTasks(): number {
    if (this.isClosed()) return 0;
    return Math.max(0, Atomics.load(queueParts.words(this).words, UNFINISHED));
  }

  /**
   * Python's join(): resolves true once every item put (in any process) has had its
   * taskDone(), at once when none is unfinished; false after `timeout` ms (default: no limit;
   * Python's join() has no timeout). Rejects with QueueClosedError if this queue is closed in
   * this process meanwhile.
   */
  async join(options?: TimeoutOptions): Promise<boolean> {
    const limit = timeoutOption(options);
    if (this.isClosed()) throw new QueueClosedError('This queue was closed in this process; it cannot be used here any more.');
    const state = queueParts.words(this);
    const w = state.words;
    const done = Atomics.load(w, DONE); // first: see NOTE [Unfinished tasks]
    if (Atomics.load(w, UNFINISHED) <= 0) return true;
    if (limit === 0) return false;
    const deadline = limit === null ? Infinity : performance.now() + limit;
    Atomics.add(w, JOINERS, 1);
    let closed = false;
    try {
      for (;;) {
        if (Atomics.load(w, DONE) !== done || Atomics.load(w, UNFINISHED) <= 0) return true;
        const left = deadline - performance.now();
        if (left <= 0) return false;
        const native = state.waitAsync(DONE, done, Math.min(left, SLICE_MS));
        native.catch(() => {}); // settles after close() too, with nobody left to hear it
        let cut!: () => void;
        const cutShort = new Promise<void>((resolve) => (cut = resolve));
        this.#onClose.add(cut);
        try {
          await Promise.race([native, cutShort]);
        } finally {
          this.#onClose.delete(cut);
        }
        if (this.isClosed()) {
          closed = true;
          throw new QueueClosedError('This queue was closed in this process while join() waited.');
        }
      }
    } finally {
      // After close() the words may be unmapped, and close() gave up this process's count.
      if (!closed) Atomics.sub(w, JOINERS, 1);
    }
  }

  /** As Queue.close(); a pending join() of this process rejects with QueueClosedError. */
  override close(): void {
    if (this.isClosed()) return;
    const state = queueParts.words(this);
    // The puts that wait for a slot are rejected by this close, and their rejection is seen
    // only once the words are gone: they are not tasks, taken back now.
    for (let n = queueParts.waitingPuts(this); n > 0; n--) this.#finish(state.words);
    if (this.#onClose.size > 0) {
      Atomics.sub(state.words, JOINERS, this.#onClose.size);
      for (const cut of this.#onClose) cut();
      state.wake(DONE); // ends their futex threads now (a joiner elsewhere looks again and sleeps on)
    }
    super.close();
  }

  static {
    registerReduction<JoinableQueue>(queueParts.reduction('joinable-queue', JoinableQueue, () => new JoinableQueue()));
  }
}
