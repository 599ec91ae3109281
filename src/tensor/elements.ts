// Element conversion (the JS value a dtype's element reads as and is written from) and
// strided iteration.
import { InvalidArgumentError } from '../errors.js';
import { type DTypeInfo, type Scalar, bfloat16ToNumber, float16ToNumber, numberToBfloat16, numberToFloat16 } from './dtype.js';
import { describe } from './shape.js';

/** The value a raw stored element stands for. */
export function readScalar(info: DTypeInfo, raw: number | bigint): Scalar {
  switch (info.kind) {
    case 'number':
    case 'bigint':
      return raw;
    case 'bool':
      return raw !== 0;
    case 'half':
      return info.name === 'float16' ? float16ToNumber(raw as number) : bfloat16ToNumber(raw as number);
  }
}

/** The raw element to store for a value; a value the dtype cannot hold is a coded error. */
export function writeScalar(info: DTypeInfo, v: unknown): number | bigint {
  switch (info.kind) {
    case 'number':
      if (typeof v === 'number') return v;
      if (typeof v === 'boolean') return v ? 1 : 0;
      break; // a bigint only into int64/uint64 (or bool): a cast is copy()'s, not a store's
    case 'bigint':
      if (typeof v === 'bigint') return v;
      if (typeof v === 'number' && Number.isInteger(v)) return BigInt(v);
      if (typeof v === 'boolean') return v ? 1n : 0n;
      break;
    case 'bool':
      // Non-zero is true, as in torch: NaN too (a bare `v ? 1 : 0` would make NaN false).
      if (typeof v === 'number') return v !== 0 ? 1 : 0;
      if (typeof v === 'boolean' || typeof v === 'bigint') return v ? 1 : 0;
      break;
    case 'half': {
      const x = typeof v === 'boolean' ? (v ? 1 : 0) : v;
      if (typeof x === 'number') return info.name === 'float16' ? numberToFloat16(x) : numberToBfloat16(x);
      break;
    }
  }
  const hint =
    info.kind === 'bigint'
      ? ' (an integer number or a bigint)'
      : typeof v === 'bigint'
        ? ' (a number: convert with Number(), or use dtype int64)'
        : '';
  throw new InvalidArgumentError(`Cannot store ${describe(v)} in a ${info.name} tensor${hint}.`);
}

/**
 * Calls fn(storageIndex, k) for every element in row-major order (k counts from 0).
 * An odometer over the dimensions: no recursion, no allocation per element.
 */
export function forEachOffset(
  shape: readonly number[],
  stride: readonly number[],
  offset: number,
  fn: (index: number, k: number) => void,
): void {
  const ndim = shape.length;
  let n = 1;
  for (const d of shape) n *= d;
  if (n === 0) return;
  if (ndim === 0) {
    fn(offset, 0);
    return;
  }
  const counter = new Array<number>(ndim).fill(0);
  let index = offset;
  const last = ndim - 1;
  const lastSize = shape[last]!;
  const lastStride = stride[last]!;
  for (let k = 0; k < n; ) {
    for (let j = 0; j < lastSize; j++, k++) fn(index + j * lastStride, k);
    // carry into the outer dimensions
    let d = last - 1;
    for (; d >= 0; d--) {
      counter[d]!++;
      index += stride[d]!;
      if (counter[d]! < shape[d]!) break;
      index -= stride[d]! * shape[d]!;
      counter[d] = 0;
    }
    if (d < 0) break;
  }
}
