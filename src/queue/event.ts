// Event: torch.multiprocessing.Event across processes and threads. The flag is a word of
// shared memory (shared-words.ts); wait() sleeps on it with a futex on a thread of its own
// (futexWaitAsync), so the event loop stays free and a set() in any process wakes it.
import { QueueClosedError } from '../errors.js';
import { checkTimeout, registerReduction } from '../transport/index.js';
import { SharedWords } from './shared-words.js';
import { checkState, remember, identityKey, reuseOrAdopt, track, untrack } from './lifetime.js';
import { checkArgCount } from '../arguments.js';
import { claimName, releaseName } from '../transport/names/index.js';

export interface EventOptions {
  /** Reachable by this name from any process of this user: `mp.attach(name)` (NOTE [Named objects]). */
  name?: string;
}

const FLAG = 0;
const WAITERS = 1;
/** Counts set() calls: the word waits sleep on (NOTE [Event generations]). */
const SETS = 2;

// NOTE [Event generations]
// As threading.Event, wait() returns true if the flag was set at any time after it began,
// even if it was cleared again before the waiter ran (a set(); clear() pulse). Sleeping on
// the flag itself would miss such a pulse: the waiter wakes, finds the flag clear, and sleeps
// on. So set() also counts itself in SETS, and waits sleep on that count: a waiter that sees
// it changed since it began knows a set() happened, whatever the flag says now.
/** The longest one futex wait of Event.wait() lasts (see there). */
const SLICE_MS = 1000;

let adopting: { words: SharedWords; key: string } | null = null;

export class Event {
  readonly #state: SharedWords;
  readonly #core: { close(): void };
  #closed = false;

  constructor(options?: EventOptions) {
    // A received Event (adopting) has no name; a new one takes its name first (NOTE [Named objects]).
    const claim = adopting === null ? claimName(options, 'new Event()') : null;
    let words: SharedWords;
    try {
      words = adopting?.words ?? SharedWords.create();
    } catch (e) {
      claim?.close();
      throw e;
    }
    let key = adopting?.key;
    adopting = null;
    if (key === undefined) {
      try {
        key = identityKey(words.fd);
      } catch (e) {
        words.close();
        claim?.close();
        throw e;
      }
    }
    this.#state = words;
    // The finalizer's held value must not reach `this`: it closes the words directly.
    this.#core = { close: () => words.close() };
    track(this, this.#core);
    remember(key, this);
    claim?.serve(this);
  }

  isSet(): boolean {
    checkArgCount('Event.isSet()', arguments, 0);
    this.#check();
    return Atomics.load(this.#state.words, FLAG) === 1;
  }

  /** Sets the flag and wakes every waiter, in every process. */
  set(): void {
    checkArgCount('Event.set()', arguments, 0);
    this.#check();
    const w = this.#state.words;
    Atomics.store(w, FLAG, 1);
    Atomics.add(w, SETS, 1);
    if (Atomics.load(w, WAITERS) > 0) this.#state.wake(SETS);
  }

  clear(): void {
    checkArgCount('Event.clear()', arguments, 0);
    this.#check();
    Atomics.store(this.#state.words, FLAG, 0);
  }

  /**
   * Resolves true once the flag is set (or was set at any moment since the wait began, even
   * if cleared since: NOTE [Event generations]), or false after `timeout` ms (default: no limit).
   */
  async wait(timeout?: number): Promise<boolean> {
    checkArgCount('Event.wait()', arguments, 1);
    this.#check();
    return this.#waitFor(checkTimeout(timeout), null);
  }

  /**
   * @internal mp.wait(): as wait(), and false as soon as `stop` resolves (its futex thread
   * woken then, so that nothing is left waiting).
   */
  waitUntil(limit: number | null, stop: Promise<void>): Promise<boolean> {
    this.#check();
    return this.#waitFor(limit, stop);
  }

  async #waitFor(limit: number | null, stop: Promise<void> | null): Promise<boolean> {
    let stopped = false;
    void stop?.then(() => {
      stopped = true;
    });
    const w = this.#state.words;
    // The count first: a pulse after it is seen, whenever it comes (after the flag check too).
    const sets = Atomics.load(w, SETS);
    if (Atomics.load(w, FLAG) === 1) return true;
    if (limit === 0) return false;
    const deadline = limit === null ? Infinity : performance.now() + limit;
    Atomics.add(w, WAITERS, 1);
    try {
      for (;;) {
        if (Atomics.load(w, FLAG) === 1 || Atomics.load(w, SETS) !== sets) return true;
        const left = deadline - performance.now();
        if (left <= 0) return false;
        // A set() between the load above and the futex call makes it return at once. The
        // wait is cut into slices: a futex wait cannot be interrupted from here, and a wait
        // whose Event is closed must not leave its thread waiting for good.
        const native = this.#state.waitAsync(SETS, sets, Math.min(left, SLICE_MS));
        native.catch(() => {}); // settles after close() too, with nobody left to hear it
        // A signal of this slice's own for close() (one kept across slices would gather a
        // callback per slice until the Event is closed).
        let cut!: () => void;
        const closed = new Promise<void>((resolve) => (cut = resolve));
        this.#onClose.add(cut);
        try {
          await Promise.race(stop === null ? [native, closed] : [native, closed, stop]);
        } finally {
          this.#onClose.delete(cut);
        }
        this.#check(); // closed here while waiting: the words may be gone
        if (stopped) {
          // Ends this wait's futex thread now (a waiter elsewhere looks again and sleeps on).
          this.#state.wake(SETS);
          return Atomics.load(w, FLAG) === 1 || Atomics.load(w, SETS) !== sets;
        }
      }
    } finally {
      // Not after close(): the words may be unmapped, and close() gave up this process's count.
      if (!this.#closed) Atomics.sub(w, WAITERS, 1);
    }
  }
  /** Ends the current slice of each pending wait (close()): one per wait of this process. */
  readonly #onClose = new Set<() => void>();

  /** Frees this process's descriptor and mapping (a pending wait keeps the mapping until it ends). */
  close(): void {
    checkArgCount('Event.close()', arguments, 0);
    releaseName(this); // NOTE [Named objects]
    if (this.#closed) return;
    this.#closed = true;
    untrack(this.#core);
    if (this.#onClose.size > 0) {
      // This process's waits end now (they reject): set() need not wake them any more. The
      // wake ends their futex threads at once (a waiter elsewhere sees the flag unset and
      // waits on).
      Atomics.sub(this.#state.words, WAITERS, this.#onClose.size);
      for (const cut of this.#onClose) cut();
      this.#state.wake(SETS);
    }
    this.#state.close();
  }

  #check(): void {
    if (this.#closed) throw new QueueClosedError('This event was closed in this process; it cannot be used here any more.');
  }

  static {
    registerReduction<Event>({
      name: 'event',
      type: Event,
      reduce(e, ctx) {
        e.#check();
        return [ctx.fd(e.#state.fd)];
      },
      rebuild(state, ctx) {
        const [i] = checkState(state, 1, 'event');
        const fd = ctx.takeFd(i!);
        return reuseOrAdopt<Event>(
          [fd],
          0,
          (x) => !x.#closed,
          (key) => {
            adopting = { words: SharedWords.open(fd), key }; // open() closes fd if it fails
            return new Event();
          },
        );
      },
    });
  }
}
