// Waiting, written once for both the blocking (acquireSync) and the async (acquire) forms.
//
// NOTE [One wait loop, two drivers]
// Each object's slow path is a generator that yields the futex waits it needs ("sleep while
// words[index] === expected, at most ms") and receives their results. runSync() performs
// them on this thread (futexWait); runAsync() on a thread of the addon's own (futexWaitAsync),
// so that the event loop stays free. No wait is longer than WAIT_SLICE_MS: a waiter whose
// slice ran out with the same holder in the word looks at whether that holder still lives
// (NOTE [Robust holders]), and a futex wait cannot be interrupted from JavaScript.
import type { FutexResult } from '../native/index.js';
import { InvalidArgumentError } from '../errors.js';
import { checkTimeout } from '../transport/index.js';
import type { SyncBlock } from './block.js';

/** The longest one futex wait lasts; also how soon a dead holder is noticed. */
export const WAIT_SLICE_MS = 50;
/** Loads of a busy word before sleeping: a holder on another core is usually out by then. */
export const SPIN = 100;

export interface AcquireOptions {
  /** false: try once, never wait (Python's `acquire(False)`). Default true. */
  readonly blocking?: boolean;
  /** Milliseconds to wait at most (default: no limit). */
  readonly timeout?: number;
}

export interface FutexStep {
  readonly index: number;
  readonly expected: number;
  readonly ms: number;
}

export type Waiting<R> = Generator<FutexStep, R, FutexResult>;

/**
 * The deadline (performance.now() time) an acquire's options give: Infinity for none,
 * -Infinity for a try that must not wait (blocking: false, or timeout 0).
 */
export function deadlineOf(opts: AcquireOptions | undefined): number {
  if (opts === undefined) return Infinity;
  if (typeof opts !== 'object' || opts === null) {
    throw new InvalidArgumentError(`acquire() takes an options object { blocking?, timeout? } (got ${String(opts)}).`);
  }
  const { blocking, timeout } = opts;
  if (blocking !== undefined && typeof blocking !== 'boolean')
    throw new InvalidArgumentError(`blocking must be a boolean (got ${String(blocking)}).`);
  const limit = checkTimeout(timeout);
  if (blocking === false || limit === 0) return -Infinity;
  return limit === null ? Infinity : performance.now() + limit;
}

/** Milliseconds of `deadline` left, 0 when past. */
export function msLeft(deadline: number): number {
  if (deadline === Infinity) return Infinity;
  return Math.max(0, deadline - performance.now());
}

export function runSync<R>(block: SyncBlock, steps: Waiting<R>): R {
  let r = steps.next();
  while (!r.done) {
    const { index, expected, ms } = r.value;
    let result: FutexResult;
    try {
      result = block.waitSync(index, expected, ms);
    } catch (e) {
      r = steps.throw(e);
      continue;
    }
    r = steps.next(result);
  }
  return r.value;
}

export async function runAsync<R>(block: SyncBlock, steps: Waiting<R>): Promise<R> {
  let r = steps.next();
  while (!r.done) {
    const { index, expected, ms } = r.value;
    let result: FutexResult;
    try {
      result = await block.waitAsync(index, expected, ms);
    } catch (e) {
      r = steps.throw(e);
      continue;
    }
    r = steps.next(result);
  }
  return r.value;
}
