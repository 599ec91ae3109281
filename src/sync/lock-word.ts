// The lock word: one 32-bit word of shared memory that is 0 when free and holds its holder's
// token (NOTE [Robust holders]) when taken, with bit 31 set when someone may be sleeping on
// it. Lock, RLock, and the barrier's own lock use it.
//
// NOTE [Lock word protocol]
// Acquire: compare-and-swap 0 -> token. Release: exchange -> 0, and a futex wake if the
// waiters bit was set. That is all the uncontended path does. A contended acquire spins a
// little (SPIN loads), then sets the waiters bit and sleeps on the word with the value it
// saw; once it has slept, it takes a free word as token|waiters, since it cannot know whether
// others still sleep (the classic futex mutex, Drepper's "Futexes are tricky", mutex 2).
// A sleeper whose whole slice passed with the same value in the word checks the holder: if
// it died, the sleeper swaps the word from that value to its own token, which only one
// sleeper can do, and reports the takeover. A Lock (as Python's) may be released by any
// thread or process; only an RLock is owned.
import { myToken, holderAlive, tokenTid, TOKEN_MASK, WAITERS } from './holder.js';
import { WAIT_SLICE_MS, SPIN, msLeft, type Waiting } from './wait.js';
import type { SyncBlock } from './block.js';
import { OwnerDiedWarning, WouldDeadlockError } from '../errors.js';

export const TIMED_OUT = 0;
export const TAKEN = 1;
/** Taken over from a holder that had died. */
export const TOOK_OVER = 2;
export type Outcome = typeof TIMED_OUT | typeof TAKEN | typeof TOOK_OVER;

/** What a holder-less try needs to remember between calls: the value it keeps finding. */
export interface Staleness {
  word: number;
  since: number;
}

/** One try, no waiting: taken when free, or when its holder is known dead (see tryStale). */
export function tryTake(words: Int32Array, i: number): boolean {
  return Atomics.compareExchange(words, i, 0, myToken()) === 0;
}

/**
 * A non-blocking try that failed: if the same value has stayed in the word for a slice,
 * looks at its holder, and takes the word over if it died. Without this, a program that only
 * ever polls (acquire({blocking: false})) would never get a lock whose holder died.
 */
export function tryStale(words: Int32Array, i: number, stale: Staleness, what: string): Outcome {
  const v = Atomics.load(words, i);
  if (v === 0) return tryTake(words, i) ? TAKEN : TIMED_OUT;
  const now = performance.now();
  if (stale.word !== v) {
    stale.word = v;
    stale.since = now;
    return TIMED_OUT;
  }
  if (now - stale.since < WAIT_SLICE_MS) return TIMED_OUT;
  stale.since = now;
  return takeOverIfDead(words, i, v, what) ? TOOK_OVER : TIMED_OUT;
}

function takeOverIfDead(words: Int32Array, i: number, v: number, what: string): boolean {
  if (holderAlive(v)) return false;
  if (Atomics.compareExchange(words, i, v, myToken() | WAITERS) !== v) return false;
  process.emitWarning(
    new OwnerDiedWarning(
      `A ${what} was taken over from thread ${tokenTid(v)}, which died holding it: what it protects may be half-updated (lock.ownerDied is true).`,
      tokenTid(v),
    ),
  );
  return true;
}

/**
 * The slow path of an acquire (NOTE [Lock word protocol]). `sync`: this thread will block, so
 * a word held by this very thread can never be released: that is a WouldDeadlockError.
 */
export function* acquireWord(words: Int32Array, i: number, deadline: number, sync: boolean, what: string): Waiting<Outcome> {
  const me = myToken();
  for (let k = 0; k < SPIN; k++) {
    if (Atomics.load(words, i) === 0 && Atomics.compareExchange(words, i, 0, me) === 0) return TAKEN;
  }
  for (;;) {
    let v = Atomics.load(words, i);
    if (v === 0) {
      if (Atomics.compareExchange(words, i, 0, me | WAITERS) === 0) return TAKEN;
      continue;
    }
    if (sync && (v & TOKEN_MASK) === me) {
      throw new WouldDeadlockError(
        `acquireSync() of a ${what} this thread holds would block for ever: release it first, or use await acquire(), which lets the holder run.`,
      );
    }
    if ((v & WAITERS) === 0) {
      if (Atomics.compareExchange(words, i, v, v | WAITERS) !== v) continue;
      v |= WAITERS;
    }
    const left = msLeft(deadline);
    if (left <= 0) return TIMED_OUT;
    const r = yield { index: i, expected: v, ms: Math.min(left, WAIT_SLICE_MS) };
    if (r === 'timed-out' && Atomics.load(words, i) === v && takeOverIfDead(words, i, v, what)) return TOOK_OVER;
  }
}

/** Frees the word; returns what it held (0: it was not held). */
export function releaseWord(block: SyncBlock, i: number): number {
  const old = Atomics.exchange(block.words, i, 0);
  if (old < 0) block.wake(i, 1); // the waiters bit is the sign bit
  return old;
}
