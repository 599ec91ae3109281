// Locks, semaphores, conditions, barriers and shared values across processes and threads
// (API.md "Synchronization and shared values").
import { SharedArray, SharedValue, type SharedOptions } from './shared-data.js';
import type { Typecode } from './typecodes.js';
import type { Scalar } from '../tensor/index.js';

export { Lock, RLock } from './lock.js';
export type { NameOptions } from './lock.js';
export { Semaphore, BoundedSemaphore } from './semaphore.js';
export { Condition } from './condition.js';
export { Barrier } from './barrier.js';
export type { BarrierOptions } from './barrier.js';
export type { BarrierAction, ActionTarget } from './barrier-action.js';
export { Held } from './held.js';
export type { AcquireOptions } from './wait.js';
export { SharedValue, SharedArray } from './shared-data.js';
export type { SharedOptions } from './shared-data.js';
export type { Typecode } from './typecodes.js';

/** mp.Value(typecode | dtype, initial = 0, { lock }): callable with or without `new`, as in Python. */
export interface ValueFactory {
  /** Typecode 'c': one byte, read as a one-character string (written from one, or from a number 0-255). */
  (type: 'c', initial?: string | number, opts?: SharedOptions): SharedValue<string>;
  (type: Typecode, initial?: Scalar, opts?: SharedOptions): SharedValue;
  new (type: 'c', initial?: string | number, opts?: SharedOptions): SharedValue<string>;
  new (type: Typecode, initial?: Scalar, opts?: SharedOptions): SharedValue;
  readonly prototype: SharedValue;
}
/** mp.Array(typecode | dtype, sizeOrData, { lock }): callable with or without `new`. */
export interface ArrayFactory {
  /** Typecode 'c': bytes, made from a size, a string ('hello') or bytes; elements read as one-character strings. */
  (
    type: 'c',
    sizeOrData: number | string | Iterable<string | number> | ArrayLike<string | number>,
    opts?: SharedOptions,
  ): SharedArray<string>;
  (type: Typecode, sizeOrData: number | Iterable<Scalar> | ArrayLike<Scalar>, opts?: SharedOptions): SharedArray;
  new (
    type: 'c',
    sizeOrData: number | string | Iterable<string | number> | ArrayLike<string | number>,
    opts?: SharedOptions,
  ): SharedArray<string>;
  new (type: Typecode, sizeOrData: number | Iterable<Scalar> | ArrayLike<Scalar>, opts?: SharedOptions): SharedArray;
  readonly prototype: SharedArray;
}

function makeValue(type: Typecode, initial?: Scalar | string, opts?: SharedOptions): SharedValue<Scalar | string> {
  return new SharedValue(type, initial, opts);
}
makeValue.prototype = SharedValue.prototype; // `x instanceof mp.Value`
function makeArray(
  type: Typecode,
  sizeOrData: number | string | Iterable<Scalar | string> | ArrayLike<Scalar | string>,
  opts?: SharedOptions,
): SharedArray<Scalar | string> {
  return new SharedArray(type, sizeOrData, opts);
}
makeArray.prototype = SharedArray.prototype;

export const Value = makeValue as unknown as ValueFactory;
// biome-ignore lint/suspicious/noShadowRestrictedNames: mp.Array is the API's name (Python's multiprocessing.Array).
export const Array = makeArray as unknown as ArrayFactory;
