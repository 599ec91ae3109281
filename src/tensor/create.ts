// Tensor factories: empty, zeros, full, tensor.
import { InvalidArgumentError, InvalidDtypeError, InvalidShapeError } from '../errors.js';
import { type DType, type DTypeInfo, type Scalar, dtypeInfo, dtypeOfArray } from './dtype.js';
import { writeScalar } from './elements.js';
import { checkShape, numelOf, describe, MAX_DIMS } from './shape.js';
import { Storage } from './storage.js';
import { Tensor } from './tensor.js';
import { type Device, deviceIndex, parseDevice } from './device.js';

export interface TensorOptions {
  dtype?: DType;
  /** Allocate in shared memory directly (from the per-process segment cache). */
  shared?: boolean;
  /** 'cpu' (the default), or 'cuda' / 'cuda:N': the tensor's elements on that CUDA device. */
  device?: Device | 'cuda';
}

function options(opts: unknown): { info: DTypeInfo; shared: boolean; device: Device } {
  if (opts === undefined) return { info: dtypeInfo('float32'), shared: false, device: 'cpu' };
  if (opts === null || typeof opts !== 'object') throw new InvalidArgumentError(`options must be an object, got ${describe(opts)}.`);
  let o: TensorOptions;
  try {
    // Read once: a revoked Proxy (or throwing getters) as the options is the caller's error, ours to name.
    o = { dtype: (opts as TensorOptions).dtype, shared: (opts as TensorOptions).shared, device: (opts as TensorOptions).device };
  } catch (e) {
    throw new InvalidArgumentError(
      `options could not be read (${(e as Error)?.message ?? String(e)}): pass a plain object such as { dtype: 'float32' }.`,
      { cause: e },
    );
  }
  if (o.shared !== undefined && typeof o.shared !== 'boolean')
    throw new InvalidArgumentError(`shared must be true or false, got ${describe(o.shared)}.`);
  const info = dtypeInfo(o.dtype === undefined ? 'float32' : o.dtype);
  return { info, shared: o.shared === true, device: parseDevice(o.device) };
}

/**
 * A new contiguous tensor whose contents are unspecified, as torch.empty: with
 * `shared: true` it may be a recycled segment holding an earlier tensor's bytes, and
 * private memory may hold what this process freed before (NOTE [Uninitialized private memory]).
 */
export function empty(shape: readonly number[] | number, opts?: TensorOptions): Tensor {
  return make(shape, opts, false);
}

function make(shape: readonly number[] | number, opts: TensorOptions | undefined, zero: boolean): Tensor {
  const { info, shared, device } = options(opts);
  const dims = checkShape(shape);
  const nbytes = numelOf(dims, info.itemsize) * info.itemsize;
  if (device !== 'cpu') {
    const t = new Tensor(Storage.onDevice(deviceIndex(device), nbytes), info, dims);
    return zero ? t.fill(0) : t;
  }
  return new Tensor(Storage.allocate(nbytes, shared, zero), info, dims);
}

export function zeros(shape: readonly number[] | number, opts?: TensorOptions): Tensor {
  const t = make(shape, opts, true);
  // Private memory is allocated zeroed (calloc), and so is a segment just made; a recycled one is not.
  // fill() streams a large one (NOTE [Streaming fill]).
  if (t.device === 'cpu' && t.isShared() && t.storage.backing?.zeroed !== true) t.fill(0);
  return t;
}

export function full(shape: readonly number[] | number, value: Scalar, opts?: TensorOptions): Tensor {
  writeScalar(options(opts).info, value); // check the value before allocating
  return empty(shape, opts).fill(value);
}

export interface FromDataOptions {
  dtype?: DType;
  shape?: readonly number[];
}

/**
 * From a TypedArray (wrapped, not copied: writes show through both ways), a flat array of
 * numbers/bigints/booleans, or nested arrays (copied). Number data defaults to float32,
 * bigint data to int64, boolean data to bool.
 */
export function tensor(data: unknown, opts: FromDataOptions = {}): Tensor {
  if (opts === null || typeof opts !== 'object') throw new InvalidArgumentError(`options must be an object, got ${describe(opts)}.`);
  try {
    return fromData(data, opts);
  } catch (e) {
    // A revoked Proxy (or one whose traps throw) anywhere in the data: reading it throws a
    // TypeError of the engine's, which becomes ours, with it as the cause.
    if (e instanceof TypeError && !('code' in e))
      throw new InvalidArgumentError(`tensor() could not read its data: ${e.message}.`, { cause: e });
    throw e;
  }
}

function fromData(data: unknown, opts: FromDataOptions): Tensor {
  if (ArrayBuffer.isView(data) && !(data instanceof DataView)) {
    const own = dtypeOfArray(data);
    if (own === undefined) throw new InvalidArgumentError(`Cannot wrap a ${describe(data)}.`);
    const dtype = opts.dtype === undefined ? own : dtypeInfo(opts.dtype).name;
    const info = dtypeInfo(dtype);
    if (dtypeInfo(own).array !== info.array) {
      throw new InvalidDtypeError(
        `A ${data.constructor.name} holds ${own} elements and cannot be wrapped as ${dtype} without a copy: pass a ${info.array.name}, or convert first.`,
      );
    }
    const n = data.byteLength / info.itemsize;
    const shape = opts.shape === undefined ? [n] : checkShape(opts.shape);
    if (numelOf(shape, info.itemsize) !== n) {
      throw new InvalidArgumentError(`shape [${shape.join(', ')}] does not hold the ${n} elements of the array.`);
    }
    return new Tensor(Storage.wrap(data.buffer, data.byteOffset, data.byteLength), dtype, shape);
  }
  if (!Array.isArray(data)) {
    throw new InvalidArgumentError(`tensor() takes a TypedArray or (nested) arrays of numbers, got ${describe(data)}.`);
  }
  // The shape follows the first element at each depth; flatten() checks the rest against it.
  // Bounded by MAX_DIMS: an array that contains itself (a[0] = a) would never end.
  const inferred: number[] = [];
  for (let x: unknown = data; Array.isArray(x); x = x[0]) {
    if (inferred.length === MAX_DIMS)
      throw new InvalidShapeError(
        `tensor() data is nested more than ${MAX_DIMS} levels deep (or contains itself); at most ${MAX_DIMS} dimensions are supported.`,
      );
    inferred.push(x.length);
  }
  const flat: unknown[] = [];
  flatten(data, 0, inferred, flat);
  const first = flat[0];
  const dtype =
    opts.dtype !== undefined ? opts.dtype : typeof first === 'bigint' ? 'int64' : typeof first === 'boolean' ? 'bool' : 'float32';
  const shape = opts.shape === undefined ? inferred : checkShape(opts.shape);
  const info = dtypeInfo(dtype);
  if (numelOf(shape, info.itemsize) !== flat.length) {
    throw new InvalidArgumentError(`shape [${shape.join(', ')}] does not hold the ${flat.length} values given.`);
  }
  const t = empty(shape, { dtype });
  const raw = t.data as unknown as (number | bigint)[];
  for (let i = 0; i < flat.length; i++) raw[i] = writeScalar(info, flat[i]);
  return t;
}

function flatten(a: unknown[], depth: number, shape: readonly number[], out: unknown[]): void {
  if (a.length !== shape[depth]) throw ragged(depth);
  const leaf = depth + 1 === shape.length;
  for (const x of a) {
    if (Array.isArray(x) === leaf) throw ragged(depth + 1);
    if (leaf) out.push(x);
    else flatten(x as unknown[], depth + 1, shape, out);
  }
}

function ragged(depth: number): InvalidArgumentError {
  return new InvalidArgumentError(
    `Nested arrays are ragged at dimension ${depth}: every sub-array of one level must have the same length and depth.`,
  );
}
