// Condition: multiprocessing.Condition(lock?) across processes and threads.
//
// NOTE [Condition slots]
// Each wait() takes a slot [token, state, ticket] of the condition's block while it holds the
// lock, then lets go of the lock and sleeps on its own slot's state word. notify(n) (lock
// held) marks the n oldest waiting slots notified and wakes each, so exactly those waiters
// return, in the order they began to wait, and a waiter that starts after a notify cannot take
// it (Python's semantics; a single counter of pending wake-ups could be taken by a late
// comer). A waiter that times out takes the lock back first and then looks at its slot: a
// notify that came meanwhile counts (it returns true), so none is lost. Every change to the
// slots is made with the lock held; the sleeper only reads its own state. A waiter that died
// leaves its slot: notify() skips (and frees) dead waiters when it has to choose among more
// waiters than it wakes, so a notify is not spent on the dead; a full table frees theirs.
import { InvalidArgumentError, InvalidCountError, NotHeldError, SyncCapacityError, FrameDecodeError } from '../errors.js';
import { checkTimeout } from '../transport/index.js';
import { SyncBlock, kBlock, registerSyncKind } from './block.js';
import { holderAlive, myToken } from './holder.js';
import { Lock, RLock, kIsMine, kRestore, kSave } from './lock.js';
import { WAIT_SLICE_MS, msLeft, type AcquireOptions } from './wait.js';
import type { Held } from './held.js';

const COND_TAG = 0x434f4e44; // 'COND'
const TICKET = 1;
const SLOT0 = 4;
const SLOT_WORDS = 4;
/** Threads that may wait on one condition at once. */
export const CONDITION_WAITERS = 63;
const WORDS = SLOT0 + SLOT_WORDS * CONDITION_WAITERS;
const FREE = 0;
const WAITING = 1;
const NOTIFIED = 2;

let placing: { block: SyncBlock; lock: Lock | RLock } | null = null;

export class Condition {
  readonly #lock: Lock | RLock;
  readonly #block: SyncBlock;
  readonly #w: Int32Array;

  /** `lock`: a Lock or RLock to use (default: a new RLock, as in Python). */
  constructor(lock?: Lock | RLock) {
    const received = placing;
    placing = null;
    if (received !== null) {
      this.#block = received.block;
      this.#lock = received.lock;
    } else {
      if (lock !== undefined && !(lock instanceof Lock) && !(lock instanceof RLock)) {
        throw new InvalidArgumentError(`Condition(lock) takes an mp.Lock or mp.RLock (got ${String(lock)}).`);
      }
      this.#lock = lock ?? new RLock();
      this.#block = SyncBlock.create(WORDS * 4);
      Atomics.store(this.#block.words, 0, COND_TAG);
    }
    this.#w = this.#block.words;
    this.#block.remember(0, this);
  }

  /** The lock's acquire(). */
  acquire(opts?: AcquireOptions): Promise<boolean> {
    return this.#lock.acquire(opts);
  }
  acquireSync(opts?: AcquireOptions): boolean {
    return this.#lock.acquireSync(opts);
  }
  hold(opts?: AcquireOptions): Promise<Held> {
    return this.#lock.hold(opts);
  }
  holdSync(opts?: AcquireOptions): Held {
    return this.#lock.holdSync(opts);
  }
  release(): void {
    this.#lock.release();
  }
  getLock(): Lock | RLock {
    return this.#lock;
  }

  #mustHold(what: string): void {
    if (!this.#lock[kIsMine]()) throw new NotHeldError(`${what} on a Condition whose lock this thread does not hold: acquire it first.`);
  }

  /** A free slot (lock held). */
  #claim(): number {
    const w = this.#w;
    for (let pass = 0; pass < 2; pass++) {
      for (let j = SLOT0; j < WORDS; j += SLOT_WORDS) if (Atomics.load(w, j + 1) === FREE) return j;
      for (let j = SLOT0; j < WORDS; j += SLOT_WORDS) {
        const t = Atomics.load(w, j);
        if (t !== 0 && !holderAlive(t)) this.#free(j);
      }
    }
    throw new SyncCapacityError(`More than ${CONDITION_WAITERS} threads wait on this Condition at once.`);
  }

  #free(slot: number): void {
    Atomics.store(this.#w, slot + 1, FREE);
    Atomics.store(this.#w, slot, 0);
  }

  /**
   * Lets go of the lock (every level of an RLock), waits for a notify or `timeout` ms, takes
   * the lock back, and resolves true if notified (Python's wait()).
   */
  async wait(timeout?: number): Promise<boolean> {
    const limit = checkTimeout(timeout);
    this.#mustHold('wait()');
    const w = this.#w;
    const slot = this.#claim();
    Atomics.store(w, slot + 2, Atomics.add(w, TICKET, 1));
    Atomics.store(w, slot, myToken());
    Atomics.store(w, slot + 1, WAITING);
    const saved = this.#lock[kSave]();
    const deadline = limit === null ? Infinity : performance.now() + limit;
    try {
      for (;;) {
        if (Atomics.load(w, slot + 1) === NOTIFIED) break;
        const left = msLeft(deadline);
        if (left <= 0) break;
        await this.#block.waitAsync(slot + 1, WAITING, Math.min(left, WAIT_SLICE_MS));
      }
    } finally {
      await this.#lock[kRestore](saved);
    }
    const notified = Atomics.load(w, slot + 1) === NOTIFIED;
    this.#free(slot);
    return notified;
  }

  /**
   * Waits until predicate() is truthy (Python's wait_for); resolves with its last result. A
   * predicate that returns at once is checked at once: the wait then begins in the same turn,
   * with no await between the check and letting go of the lock.
   */
  async waitFor<T>(predicate: () => T | Promise<T>, timeout?: number): Promise<T> {
    if (typeof predicate !== 'function') throw new InvalidArgumentError('waitFor(predicate) takes a function.');
    const limit = checkTimeout(timeout);
    const deadline = limit === null ? Infinity : performance.now() + limit;
    let r = predicate();
    let result = r instanceof Promise ? await r : r;
    while (!result) {
      const left = msLeft(deadline);
      if (left <= 0) break;
      await this.wait(left === Infinity ? undefined : left);
      r = predicate();
      result = r instanceof Promise ? await r : r;
    }
    return result;
  }

  /** Wakes the `n` longest waiting (default 1). The lock must be held. */
  notify(n = 1): void {
    if (typeof n !== 'number' || !Number.isSafeInteger(n) || n < 0)
      throw new InvalidCountError(`notify(n): n must be an integer >= 0 (got ${String(n)}).`);
    this.#mustHold('notify()');
    if (n === 0) return;
    const w = this.#w;
    const waiting: number[] = [];
    for (let j = SLOT0; j < WORDS; j += SLOT_WORDS) if (Atomics.load(w, j + 1) === WAITING) waiting.push(j);
    const choose = waiting.length > n;
    if (choose) waiting.sort((a, b) => (Atomics.load(w, a + 2) - Atomics.load(w, b + 2)) | 0); // tickets wrap
    let woken = 0;
    for (const j of waiting) {
      if (woken === n) break;
      if (choose && !holderAlive(Atomics.load(w, j))) {
        this.#free(j);
        continue;
      }
      Atomics.store(w, j + 1, NOTIFIED);
      this.#block.wake(j + 1);
      woken++;
    }
  }

  /** Wakes every waiter. The lock must be held. */
  notifyAll(): void {
    this.notify(CONDITION_WAITERS);
  }

  get [kBlock](): SyncBlock {
    return this.#block;
  }

  /** @internal */
  static placeAt(block: SyncBlock, lock: Lock | RLock): Condition {
    placing = { block, lock };
    return new Condition();
  }
}

registerSyncKind<Condition>({
  name: 'sync.condition',
  type: Condition,
  tag: COND_TAG,
  span: () => WORDS,
  reduce: (c, ctx) => ({ block: c[kBlock], base: 0, extra: [ctx.ref(c.getLock())] }),
  rebuild: (block, base, extra, ctx) => {
    const lock = Number.isSafeInteger(extra[0]) ? ctx.get(extra[0] as number) : undefined;
    if (base !== 0 || !(lock instanceof Lock || lock instanceof RLock))
      throw new FrameDecodeError('A received condition entry is malformed.');
    return Condition.placeAt(block, lock);
  },
});
