// Lock and RLock: multiprocessing.Lock / RLock across processes and threads, robust to a
// holder's death (NOTE [Robust holders], NOTE [Lock word protocol]).
import { NotHeldError, LockTimeoutError } from '../errors.js';
import { SyncBlock, registerSyncKind } from './block.js';
import { myToken, TOKEN_MASK } from './holder.js';
import { acquireWord, releaseWord, tryStale, TIMED_OUT, TOOK_OVER, type Outcome, type Staleness } from './lock-word.js';
import { deadlineOf, runAsync, runSync, type AcquireOptions } from './wait.js';
import { Held } from './held.js';
import { checkArgCount, extraArgumentsError } from '../arguments.js';
import { claimName, releaseName } from '../transport/names/index.js';

/** Options of a Lock or RLock, a Semaphore or BoundedSemaphore made here. */
export interface NameOptions {
  /** Reachable by this name from any process of this user: `mp.attach(name)` (NOTE [Named objects]). */
  name?: string;
}

/** Words of a lock: [tag, lock word, recursion count (RLock), spare]. */
export const LOCK_WORDS = 4;
const WORD = 1;
const COUNT = 2;
const LOCK_TAG = 0x4c4f434b; // 'LOCK'
const RLOCK_TAG = 0x524c434b; // 'RLCK'

/** This thread's token (NOTE [Robust holders]); module state is per thread. */
const ME = myToken();
const TRUE = Promise.resolve(true);
const FALSE = Promise.resolve(false);

/** For Condition: whether this thread holds the lock, and letting go of it around a wait. */
export const kIsMine = Symbol('isMine');
export const kSave = Symbol('save');
export const kRestore = Symbol('restore');
/** The block and first word of a lock (its reduction, and a Value's check of its own lock). */
export const kPlace = Symbol('place');

/** Where the next lock made lives: a block of another object (a Value's), or a received one. */
let placing: { block: SyncBlock; base: number; fresh: boolean } | null = null;

abstract class LockBase {
  readonly #block: SyncBlock;
  readonly #words: Int32Array;
  readonly #i: number;
  /** The recursion count's word (RLock). */
  readonly #c: number;
  readonly #recursive: boolean;
  #ownerDied = false;
  readonly #stale: Staleness = { word: 0, since: 0 };

  protected constructor(recursive: boolean, options?: NameOptions) {
    const place = placing;
    placing = null;
    // A placed lock (received, or a Value's own) has no name (NOTE [Named objects]).
    const claim = place === null ? claimName(options, `new ${recursive ? 'RLock' : 'Lock'}()`) : null;
    let block: SyncBlock;
    try {
      block = place?.block ?? SyncBlock.create(LOCK_WORDS * 4);
    } catch (e) {
      claim?.close();
      throw e;
    }
    const base = place?.base ?? 0;
    if (place === null || place.fresh) Atomics.store(block.words, base, recursive ? RLOCK_TAG : LOCK_TAG);
    this.#block = block;
    this.#words = block.words;
    this.#i = base + WORD;
    this.#c = base + COUNT;
    this.#recursive = recursive;
    block.remember(base, this);
    claim?.serve(this);
  }

  /**
   * Gives up this lock's name, if this process made it with one (NOTE [Named objects]); the
   * lock itself stays usable here and everywhere it is held.
   */
  close(): void {
    checkArgCount(`${this.#what}.close()`, arguments, 0);
    releaseName(this);
  }

  /** @internal A lock over words of `block` from `base`; `fresh`: words not yet tagged. */
  static placeAt<T extends LockBase>(this: new () => T, block: SyncBlock, base: number, fresh: boolean): T {
    placing = { block, base, fresh };
    return new this();
  }

  get #what(): string {
    return this.#recursive ? 'RLock' : 'Lock';
  }

  /** The uncontended path: one compare-and-swap (an RLock this thread holds: a count). */
  #tryFast(): boolean {
    const prev = Atomics.compareExchange(this.#words, this.#i, 0, ME);
    if (prev === 0) {
      this.#ownerDied = false;
      if (this.#recursive) this.#words[this.#c] = 1;
      return true;
    }
    if (this.#recursive && (prev & TOKEN_MASK) === ME) {
      this.#words[this.#c]!++;
      return true;
    }
    return false;
  }

  #finish(outcome: Outcome): boolean {
    if (outcome === TIMED_OUT) return false;
    this.#ownerDied = outcome === TOOK_OVER;
    if (this.#recursive) this.#words[this.#c] = 1;
    return true;
  }

  /**
   * Resolves true once this thread holds the lock, false after `timeout` ms (or at once with
   * `blocking: false`). Never blocks the event loop.
   */
  acquire(opts?: AcquireOptions): Promise<boolean> {
    const extra = extraArgumentsError('Lock.acquire()', arguments, 1);
    if (extra !== null) return Promise.reject(extra);
    if (opts === undefined) return this.#tryFast() ? TRUE : this.#acquireAsync(Infinity);
    let deadline: number;
    try {
      deadline = deadlineOf(opts);
    } catch (e) {
      return Promise.reject(e);
    }
    if (this.#tryFast()) return TRUE;
    if (deadline === -Infinity) return this.#finish(tryStale(this.#words, this.#i, this.#stale, this.#what)) ? TRUE : FALSE;
    return this.#acquireAsync(deadline);
  }

  async #acquireAsync(deadline: number): Promise<boolean> {
    return this.#finish(await runAsync(this.#block, acquireWord(this.#words, this.#i, deadline, false, this.#what)));
  }

  /**
   * acquire() that blocks this thread: for worker threads and for locks held elsewhere. A lock
   * this very thread holds (a Lock; an RLock re-enters) is a WouldDeadlockError, since nothing
   * could release it while this thread waits.
   */
  acquireSync(opts?: AcquireOptions): boolean {
    checkArgCount('Lock.acquireSync()', arguments, 1);
    if (opts === undefined && this.#tryFast()) return true;
    const deadline = deadlineOf(opts);
    if (this.#tryFast()) return true;
    if (deadline === -Infinity) return this.#finish(tryStale(this.#words, this.#i, this.#stale, this.#what));
    return this.#finish(runSync(this.#block, acquireWord(this.#words, this.#i, deadline, true, this.#what)));
  }

  /** acquire() for a scope: `using _ = await lock.hold()`. A timeout is a LockTimeoutError. */
  async hold(opts?: AcquireOptions): Promise<Held> {
    checkArgCount('Lock.hold()', arguments, 1);
    if (!(await this.acquire(opts))) throw this.#timedOut();
    return new Held(() => this.release(), this.#ownerDied);
  }

  /** acquireSync() for a scope: `using _ = lock.holdSync()`. */
  holdSync(opts?: AcquireOptions): Held {
    checkArgCount('Lock.holdSync()', arguments, 1);
    if (!this.acquireSync(opts)) throw this.#timedOut();
    return new Held(() => this.release(), this.#ownerDied);
  }

  #timedOut(): LockTimeoutError {
    return new LockTimeoutError(`The ${this.#what} was not acquired within the timeout; it is still held by another thread or process.`);
  }

  release(): void {
    checkArgCount('Lock.release()', arguments, 0);
    if (!this.#recursive) {
      // The uncontended path: one exchange (releaseWord, inlined).
      const old = Atomics.exchange(this.#words, this.#i, 0);
      if (old < 0) this.#block.wake(this.#i, 1);
      else if (old === 0) throw new NotHeldError('release() of a Lock that is not locked (released too many times).');
      return;
    }
    if (!this[kIsMine]())
      throw new NotHeldError('release() of an RLock this thread does not hold: only the thread that acquired an RLock releases it.');
    const count = this.#words[this.#c]!;
    if (count > 1) {
      this.#words[this.#c] = count - 1;
      return;
    }
    this.#words[this.#c] = 0;
    releaseWord(this.#block, this.#i);
  }

  /** Whether some thread (here or in any process) holds the lock now. */
  locked(): boolean {
    checkArgCount('Lock.locked()', arguments, 0);
    return Atomics.load(this.#words, this.#i) !== 0;
  }

  /** True when the acquire that gave this thread the lock took it over from a holder that had died. */
  get ownerDied(): boolean {
    return this.#ownerDied;
  }

  [kIsMine](): boolean {
    return (Atomics.load(this.#words, this.#i) & TOKEN_MASK) === ME;
  }

  /** Lets go of the lock entirely (every level of an RLock) for a Condition wait. */
  [kSave](): number {
    const count = this.#recursive ? this.#words[this.#c]! : 1;
    if (this.#recursive) this.#words[this.#c] = 0;
    releaseWord(this.#block, this.#i);
    return count;
  }

  /** Takes the lock back after a Condition wait, at the level [kSave] left it. */
  async [kRestore](count: number): Promise<void> {
    await this.acquire();
    if (this.#recursive) this.#words[this.#c] = count;
  }

  /** @internal */
  get [kPlace](): { block: SyncBlock; base: number } {
    return { block: this.#block, base: this.#i - WORD };
  }
}

/** multiprocessing.Lock: any thread or process may release it (as in Python). */
export class Lock extends LockBase {
  constructor(options?: NameOptions) {
    super(false, options);
  }
}

/** multiprocessing.RLock: re-entered by the thread that holds it, released by it alone. */
export class RLock extends LockBase {
  constructor(options?: NameOptions) {
    super(true, options);
  }
}

for (const [type, tag] of [
  [Lock, LOCK_TAG],
  [RLock, RLOCK_TAG],
] as const) {
  registerSyncKind<LockBase>({
    name: type === Lock ? 'sync.lock' : 'sync.rlock',
    type,
    tag,
    span: () => LOCK_WORDS,
    reduce: (lock) => ({ ...lock[kPlace], extra: [] }),
    rebuild: (block, base) => type.placeAt(block, base, false),
  });
}
