// Semaphore and BoundedSemaphore: multiprocessing's, across processes and threads, giving back
// the units of a holder that died.
//
// NOTE [Semaphore holders]
// The count is one word; who holds units is a table of slots [token, units] in the same
// block, one per thread that holds some (NOTE [Robust holders]). An acquire first adds the
// unit to its slot, then takes it from the count; a release first gives it back to the count,
// then takes it from its slot. A holder that dies between the two steps thus leaves one unit
// too many to be given back, never one too few: a semaphore may let one more in once after
// such a death (a BoundedSemaphore never past its bound), but it never loses a unit, which
// would leave a Semaphore(1) locked for ever. A waiter whose whole slice passed without a unit
// looks at the holders and gives back the units of those that died. A release by a thread
// that holds no units (a Semaphore used as a signal: released by a producer, acquired by a
// consumer) is a plain increment. So a consumer that dies gives back what it acquired and
// did not release, signals included: after a death the count is what it would be had the
// dead thread released everything it took.
import {
  BoundExceededError,
  FrameDecodeError,
  InvalidCountError,
  LockTimeoutError,
  OwnerDiedWarning,
  SyncCapacityError,
  WouldDeadlockError,
} from '../errors.js';
import { SyncBlock, kBlock, registerSyncKind } from './block.js';
import { holderAlive, myToken, tokenTid } from './holder.js';
import { TAKEN, TIMED_OUT } from './lock-word.js';
import { SPIN, WAIT_SLICE_MS, deadlineOf, msLeft, runAsync, runSync, type AcquireOptions, type Waiting } from './wait.js';
import { Held } from './held.js';
import { checkArgCount } from '../arguments.js';
import { claimName, releaseName, type NameClaim } from '../transport/names/index.js';
import type { NameOptions } from './lock.js';

const SEM_TAG = 0x53454d41; // 'SEMA'
const BSEM_TAG = 0x4253454d; // 'BSEM'
const VALUE = 1;
const WAITERS = 2;
const BOUND = 3;
const SLOT0 = 4;
/** Threads that may hold units at once. */
export const SEMAPHORE_HOLDERS = 126;
const WORDS = SLOT0 + 2 * SEMAPHORE_HOLDERS;
const RECLAIMING = -1;
const MAX_VALUE = 2 ** 31 - 1;

const TRUE = Promise.resolve(true);
const FALSE = Promise.resolve(false);

let placing: SyncBlock | null = null;

abstract class SemaphoreBase {
  readonly #block: SyncBlock;
  readonly #w: Int32Array;
  /** -1: unbounded. */
  readonly #bound: number;
  /** Word index of this thread's slot, a hint (checked on use). */
  #slot = -1;
  #lastReclaim = 0;

  protected constructor(value: unknown, bounded: boolean, options?: NameOptions) {
    const received = placing;
    placing = null;
    let claim: NameClaim | null = null;
    if (received !== null) {
      this.#block = received;
      this.#w = received.words;
      this.#bound = Atomics.load(this.#w, BOUND);
    } else {
      const what = bounded ? 'BoundedSemaphore' : 'Semaphore';
      if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 0 || value > MAX_VALUE) {
        throw new InvalidCountError(`${what}(value): value must be an integer from 0 to ${MAX_VALUE} (got ${String(value)}).`);
      }
      claim = claimName(options, `new ${what}()`); // NOTE [Named objects]
      try {
        this.#block = SyncBlock.create(WORDS * 4);
      } catch (e) {
        claim?.close();
        throw e;
      }
      this.#w = this.#block.words;
      this.#bound = bounded ? value : -1;
      Atomics.store(this.#w, VALUE, value);
      Atomics.store(this.#w, BOUND, this.#bound);
      Atomics.store(this.#w, 0, bounded ? BSEM_TAG : SEM_TAG);
    }
    this.#block.remember(0, this);
    claim?.serve(this);
  }

  /**
   * Gives up this semaphore's name, if this process made it with one (NOTE [Named objects]);
   * the semaphore itself stays usable here and everywhere it is held.
   */
  close(): void {
    checkArgCount(`${this.#what}.close()`, arguments, 0);
    releaseName(this);
  }

  /** @internal */
  static placeAt<T extends SemaphoreBase>(this: new (value?: number) => T, block: SyncBlock): T {
    placing = block;
    return new this();
  }

  get #what(): string {
    return this.#bound >= 0 ? 'BoundedSemaphore' : 'Semaphore';
  }

  /** This thread's slot (its token's word), claimed if it has none. */
  #mySlot(): number {
    const w = this.#w;
    const me = myToken();
    const hint = this.#slot;
    if (hint >= 0) {
      const t = Atomics.load(w, hint);
      if (t === me || (t === 0 && Atomics.compareExchange(w, hint, 0, me) === 0)) return hint;
    }
    for (let pass = 0; pass < 2; pass++) {
      for (let j = SLOT0; j < WORDS; j += 2) {
        if (Atomics.compareExchange(w, j, 0, me) === 0) return (this.#slot = j);
      }
      this.#reclaimDead();
    }
    throw new SyncCapacityError(`More than ${SEMAPHORE_HOLDERS} threads hold units of this ${this.#what} at once.`);
  }

  /** One try at a unit, no waiting (NOTE [Semaphore holders]: the slot first). */
  #tryTake(): boolean {
    const w = this.#w;
    let v = Atomics.load(w, VALUE);
    if (v <= 0) return false;
    const slot = this.#mySlot();
    Atomics.add(w, slot + 1, 1);
    while (v > 0) {
      const prev = Atomics.compareExchange(w, VALUE, v, v - 1);
      if (prev === v) return true;
      v = prev;
    }
    this.#dropUnit(slot);
    return false;
  }

  /** Takes one unit off this thread's slot; the slot is freed at zero. */
  #dropUnit(slot: number): void {
    const w = this.#w;
    const units = Atomics.load(w, slot + 1);
    if (units <= 0) return;
    Atomics.store(w, slot + 1, units - 1);
    if (units === 1) Atomics.store(w, slot, 0);
  }

  /** Gives back the units of holders that died; true if any came back. */
  #reclaimDead(): boolean {
    const w = this.#w;
    const me = myToken();
    let back = 0;
    for (let j = SLOT0; j < WORDS; j += 2) {
      const t = Atomics.load(w, j);
      if (t === 0 || t === RECLAIMING || t === me || holderAlive(t)) continue;
      if (Atomics.compareExchange(w, j, t, RECLAIMING) !== t) continue;
      const units = Atomics.exchange(w, j + 1, 0);
      Atomics.store(w, j, 0);
      if (units <= 0) continue;
      let v = Atomics.load(w, VALUE);
      for (;;) {
        const next = this.#bound >= 0 ? Math.min(this.#bound, v + units) : Math.min(MAX_VALUE, v + units);
        const prev = Atomics.compareExchange(w, VALUE, v, next);
        if (prev === v) break;
        v = prev;
      }
      back += units;
      process.emitWarning(
        new OwnerDiedWarning(
          `A ${this.#what} got back ${units} unit(s) held by thread ${tokenTid(t)}, which died holding them.`,
          tokenTid(t),
        ),
      );
    }
    if (back > 0) this.#block.wake(VALUE, back);
    return back > 0;
  }

  /** A try that must not wait: also gives back dead holders' units, once a slice. */
  #tryNow(): boolean {
    if (this.#tryTake()) return true;
    const now = performance.now();
    if (now - this.#lastReclaim < WAIT_SLICE_MS) return false;
    this.#lastReclaim = now;
    return this.#reclaimDead() && this.#tryTake();
  }

  /** Only this thread holds units (and the count is out): a blocking wait could never end. */
  #onlyMine(): boolean {
    const w = this.#w;
    const me = myToken();
    let mine = false;
    for (let j = SLOT0; j < WORDS; j += 2) {
      if (Atomics.load(w, j + 1) <= 0) continue;
      if (Atomics.load(w, j) !== me) return false;
      mine = true;
    }
    return mine;
  }

  *#waitForUnit(deadline: number, sync: boolean): Waiting<number> {
    const w = this.#w;
    for (let k = 0; k < SPIN; k++) if (Atomics.load(w, VALUE) > 0 && this.#tryTake()) return TAKEN;
    Atomics.add(w, WAITERS, 1);
    try {
      for (;;) {
        if (this.#tryTake()) return TAKEN;
        const left = msLeft(deadline);
        if (left <= 0) return TIMED_OUT;
        if (sync && this.#onlyMine()) {
          throw new WouldDeadlockError(
            `acquireSync() of a ${this.#what} whose units this thread alone holds would block for ever: release one first, or use await acquire().`,
          );
        }
        const r = yield { index: VALUE, expected: 0, ms: Math.min(left, WAIT_SLICE_MS) };
        if (r === 'timed-out') this.#reclaimDead();
      }
    } finally {
      Atomics.sub(w, WAITERS, 1);
    }
  }

  /** Resolves true once this thread has a unit, false after `timeout` ms (at once with `blocking: false`). */
  acquire(opts?: AcquireOptions): Promise<boolean> {
    let deadline: number;
    try {
      deadline = deadlineOf(opts);
      if (this.#tryTake()) return TRUE;
    } catch (e) {
      return Promise.reject(e);
    }
    if (deadline === -Infinity) return this.#tryNow() ? TRUE : FALSE;
    return runAsync(this.#block, this.#waitForUnit(deadline, false)).then((r) => r !== TIMED_OUT);
  }

  /** acquire() blocking this thread; a WouldDeadlockError when only this thread holds units. */
  acquireSync(opts?: AcquireOptions): boolean {
    const deadline = deadlineOf(opts);
    if (this.#tryTake()) return true;
    if (deadline === -Infinity) return this.#tryNow();
    return runSync(this.#block, this.#waitForUnit(deadline, true)) !== TIMED_OUT;
  }

  async hold(opts?: AcquireOptions): Promise<Held> {
    if (!(await this.acquire(opts))) throw this.#timedOut();
    return new Held(() => this.release(), false);
  }

  holdSync(opts?: AcquireOptions): Held {
    if (!this.acquireSync(opts)) throw this.#timedOut();
    return new Held(() => this.release(), false);
  }

  #timedOut(): LockTimeoutError {
    return new LockTimeoutError(`No unit of the ${this.#what} came free within the timeout.`);
  }

  /** Gives a unit back (any thread may: a release by one that holds none is a signal). */
  release(): void {
    const w = this.#w;
    let v = Atomics.load(w, VALUE);
    for (;;) {
      if ((this.#bound >= 0 && v >= this.#bound) || v >= MAX_VALUE) {
        throw new BoundExceededError(`release() of a ${this.#what} already at ${v}: released more times than acquired.`);
      }
      const prev = Atomics.compareExchange(w, VALUE, v, v + 1);
      if (prev === v) break;
      v = prev;
    }
    const slot = this.#slot;
    if (slot >= 0 && Atomics.load(w, slot) === myToken()) this.#dropUnit(slot);
    if (Atomics.load(w, WAITERS) > 0) this.#block.wake(VALUE, 1);
  }

  /** The count now (Python's get_value()). */
  getValue(): number {
    return Atomics.load(this.#w, VALUE);
  }

  get [kBlock](): SyncBlock {
    return this.#block;
  }
}

/** multiprocessing.Semaphore(value = 1). */
export class Semaphore extends SemaphoreBase {
  constructor(value: number = 1, options?: NameOptions) {
    super(value, false, options);
  }
}

/** multiprocessing.BoundedSemaphore(value = 1): releasing past `value` is a BoundExceededError. */
export class BoundedSemaphore extends SemaphoreBase {
  constructor(value: number = 1, options?: NameOptions) {
    super(value, true, options);
  }
}

for (const [type, tag] of [
  [Semaphore, SEM_TAG],
  [BoundedSemaphore, BSEM_TAG],
] as const) {
  registerSyncKind<SemaphoreBase>({
    name: type === Semaphore ? 'sync.semaphore' : 'sync.bounded-semaphore',
    type,
    tag,
    span: () => WORDS,
    reduce: (s) => ({ block: s[kBlock], base: 0, extra: [] }),
    rebuild: (block, base) => {
      if (base !== 0) throw new FrameDecodeError('A received semaphore is not at the start of its block.');
      return type.placeAt(block);
    },
  });
}
