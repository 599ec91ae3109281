// Barrier: multiprocessing.Barrier(parties, { action, timeout }) across processes and threads.
//
// NOTE [Barrier generations]
// The barrier's words are changed only under its own lock word (NOTE [Lock word protocol]),
// held for a few loads and stores, never across an await. A party takes the arrival index
// COUNT, and the last one (index parties - 1) runs the action, then sets COUNT back to 0 and
// advances GEN: a waiter is released when GEN is no longer the one it arrived in. RESETS
// counts reset() calls: a waiter that sees it change gets BrokenBarrierError, as in Python.
// BROKEN stays set until reset(). Parties that arrive while the last one runs the action
// (COUNT == parties) wait for the next generation before they count. Every change bumps SEQ
// and wakes its sleepers; a sleeper reads SEQ before it looks at the state, so no change falls
// between its look and its sleep. Deaths: NOTE [Barrier members].
import { BrokenBarrierError, FrameDecodeError, InvalidArgumentError, InvalidCountError, NotTransferableError } from '../errors.js';
import { checkTimeout } from '../transport/index.js';
import { SyncBlock, kBlock, registerSyncKind } from './block.js';
import { acquireWord, releaseWord } from './lock-word.js';
import { WAIT_SLICE_MS, msLeft, runSync } from './wait.js';
import { deadMember, join } from './barrier-members.js';
import { checkAction, runAction, type BarrierAction } from './barrier-action.js';

const BARRIER_TAG = 0x42415252; // 'BARR'
const LOCK = 1;
const PARTIES = 2;
const COUNT = 3;
const GEN = 4;
const BROKEN = 5;
const RESETS = 6;
const SEQ = 7;
const MEMBERS = 8;
const MEMBER0 = 12;
const MAX_PARTIES = 2 ** 20;
/** What travels besides the words: the action and the default timeout. */
const kTravel = Symbol('travel');

export interface BarrierOptions {
  /** Called once per generation, by the last party to arrive, before any is released. */
  readonly action?: BarrierAction;
  /** Default timeout of wait(), in ms (a wait that times out breaks the barrier). */
  readonly timeout?: number;
}

let placing: { block: SyncBlock; action: BarrierAction | undefined; timeout: number | null } | null = null;

export class Barrier {
  readonly #block: SyncBlock;
  readonly #w: Int32Array;
  readonly #action: BarrierAction | undefined;
  readonly #timeout: number | null;

  constructor(parties: number, opts: BarrierOptions = {}) {
    const received = placing;
    placing = null;
    if (received !== null) {
      this.#block = received.block;
      this.#action = received.action;
      this.#timeout = received.timeout;
    } else {
      if (typeof parties !== 'number' || !Number.isSafeInteger(parties) || parties < 1 || parties > MAX_PARTIES) {
        throw new InvalidCountError(`Barrier(parties): parties must be an integer from 1 to ${MAX_PARTIES} (got ${String(parties)}).`);
      }
      if (typeof opts !== 'object' || opts === null)
        throw new InvalidArgumentError('Barrier(parties, options): options must be an object { action?, timeout? }.');
      this.#action = checkAction(opts.action);
      this.#timeout = checkTimeout(opts.timeout);
      // Room for the parties and for a few more threads that only pass the barrier on.
      const members = parties + 64;
      this.#block = SyncBlock.create((MEMBER0 + members) * 4);
      const w = this.#block.words;
      Atomics.store(w, PARTIES, parties);
      Atomics.store(w, MEMBERS, members);
      Atomics.store(w, 0, BARRIER_TAG);
    }
    this.#w = this.#block.words;
    join(this, this.#block, MEMBER0, Atomics.load(this.#w, MEMBERS));
    this.#block.remember(0, this);
  }

  get parties(): number {
    return Atomics.load(this.#w, PARTIES);
  }

  /** Parties waiting now (0 while the last one runs the action). */
  get nWaiting(): number {
    const n = Atomics.load(this.#w, COUNT);
    return n < this.parties ? n : 0;
  }

  get broken(): boolean {
    return Atomics.load(this.#w, BROKEN) !== 0;
  }

  #lock(): void {
    runSync(this.#block, acquireWord(this.#w, LOCK, Infinity, false, 'Barrier'));
  }

  #unlock(changed: boolean): void {
    if (changed) Atomics.add(this.#w, SEQ, 1);
    releaseWord(this.#block, LOCK);
    if (changed) this.#block.wake(SEQ);
  }

  /** Breaks the barrier, unless the generation `gen` of epoch `epoch` has ended meanwhile. */
  #breakIf(epoch: number, gen: number): void {
    const w = this.#w;
    this.#lock();
    const now = Atomics.load(w, RESETS) === epoch && Atomics.load(w, GEN) === gen && Atomics.load(w, BROKEN) === 0;
    if (now) Atomics.store(w, BROKEN, 1);
    this.#unlock(now);
  }

  /**
   * Sleeps until SEQ moves from `seq`, or a slice passes; false once `deadline` has passed.
   * A slice that passed unchanged looks for a member that died (NOTE [Barrier members]).
   */
  async #sleep(seq: number, deadline: number): Promise<'changed' | 'timed-out' | 'member-died'> {
    const left = msLeft(deadline);
    if (left <= 0) return 'timed-out';
    const r = await this.#block.waitAsync(SEQ, seq, Math.min(left, WAIT_SLICE_MS));
    if (r === 'timed-out' && Atomics.load(this.#w, SEQ) === seq && deadMember(this.#block, MEMBER0, Atomics.load(this.#w, MEMBERS)) !== 0)
      return 'member-died';
    return 'changed';
  }

  #broken(why: string): BrokenBarrierError {
    return new BrokenBarrierError(`The barrier is broken (${why}); reset() makes it usable again.`);
  }

  /**
   * Waits for all parties; resolves with this party's arrival index (0 .. parties - 1).
   * `timeout` (default: the barrier's) breaks the barrier when it passes.
   */
  async wait(timeout?: number): Promise<number> {
    const limit = timeout === undefined ? this.#timeout : checkTimeout(timeout);
    const deadline = limit === null ? Infinity : performance.now() + limit;
    const w = this.#w;
    const parties = this.parties;
    // Enter: wait out a generation whose last party is running the action.
    for (;;) {
      const seq = Atomics.load(w, SEQ);
      this.#lock();
      if (Atomics.load(w, BROKEN) !== 0) {
        this.#unlock(false);
        throw this.#broken('aborted, timed out, or a party died');
      }
      if (Atomics.load(w, COUNT) < parties) break;
      const epoch = Atomics.load(w, RESETS);
      const gen = Atomics.load(w, GEN);
      this.#unlock(false);
      const r = await this.#sleep(seq, deadline);
      if (r !== 'changed') {
        this.#breakIf(epoch, gen);
        throw this.#broken(r === 'timed-out' ? 'a wait timed out' : 'a party died');
      }
    }
    const epoch = Atomics.load(w, RESETS);
    const gen = Atomics.load(w, GEN);
    const index = Atomics.load(w, COUNT);
    Atomics.store(w, COUNT, index + 1);
    if (index + 1 === parties) {
      this.#unlock(false);
      if (this.#action !== undefined) {
        try {
          await runAction(this.#action);
        } catch (e) {
          this.#breakIf(epoch, gen);
          throw e;
        }
      }
      this.#lock();
      const release = Atomics.load(w, RESETS) === epoch && Atomics.load(w, BROKEN) === 0;
      if (release) {
        Atomics.store(w, COUNT, 0);
        Atomics.add(w, GEN, 1);
      }
      this.#unlock(release);
      if (!release) throw this.#broken('reset or aborted while the action ran');
      return index;
    }
    let seq = Atomics.load(w, SEQ); // changes are made under the lock: this one is current
    this.#unlock(false);
    for (;;) {
      if (Atomics.load(w, GEN) !== gen) return index;
      if (Atomics.load(w, RESETS) !== epoch) throw this.#broken('reset() while waiting');
      if (Atomics.load(w, BROKEN) !== 0) throw this.#broken('aborted, timed out, or a party died');
      const r = await this.#sleep(seq, deadline);
      if (r !== 'changed') {
        this.#breakIf(epoch, gen);
        if (Atomics.load(w, GEN) !== gen) return index;
        throw this.#broken(r === 'timed-out' ? 'a wait timed out' : 'a party died');
      }
      seq = Atomics.load(w, SEQ);
    }
  }

  /** Breaks the barrier: waiting parties, and later ones, get BrokenBarrierError until reset(). */
  abort(): void {
    this.#lock();
    Atomics.store(this.#w, BROKEN, 1);
    this.#unlock(true);
  }

  /** Back to the empty, unbroken state; parties waiting now get BrokenBarrierError. */
  reset(): void {
    const w = this.#w;
    this.#lock();
    Atomics.add(w, RESETS, 1);
    Atomics.store(w, COUNT, 0);
    Atomics.store(w, BROKEN, 0);
    this.#unlock(true);
  }

  get [kBlock](): SyncBlock {
    return this.#block;
  }

  get [kTravel](): { action: BarrierAction | undefined; timeout: number | null } {
    return { action: this.#action, timeout: this.#timeout };
  }

  /** @internal */
  static placeAt(block: SyncBlock, action: BarrierAction | undefined, timeout: number | null): Barrier {
    placing = { block, action, timeout };
    return new Barrier(0);
  }
}

registerSyncKind<Barrier>({
  name: 'sync.barrier',
  type: Barrier,
  tag: BARRIER_TAG,
  span: (block, base) => MEMBER0 + Math.max(0, Atomics.load(block.words, base + MEMBERS)),
  reduce: (b) => {
    const { action: a, timeout } = b[kTravel];
    if (typeof a === 'function') {
      throw new NotTransferableError(
        'A Barrier whose action is a function cannot travel (a function cannot cross to another process): give the action as { module, export } instead.',
        'action',
      );
    }
    return { block: b[kBlock], base: 0, extra: [a === undefined ? null : [a.module.toString(), a.export ?? 'default'], timeout] };
  },
  rebuild: (block, base, extra) => {
    const [a, timeout] = extra;
    const okAction = a === null || (Array.isArray(a) && typeof a[0] === 'string' && typeof a[1] === 'string');
    if (base !== 0 || !okAction || !(timeout === null || (typeof timeout === 'number' && timeout >= 0))) {
      throw new FrameDecodeError('A received barrier entry is malformed.');
    }
    const action = a === null ? undefined : { module: new URL(a[0] as string), export: a[1] as string };
    return Barrier.placeAt(block, action, timeout as number | null);
  },
});
