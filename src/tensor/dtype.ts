// The 13 dtypes, their element sizes and the TypedArray that holds them. float16 and
// bfloat16 are stored as raw 16-bit words (Node 20 has no Float16Array); get/set/fill/toArray
// convert them to and from numbers, `t.data` gives the raw words.
import { InvalidDtypeError } from '../errors.js';

export type DType =
  | 'float32'
  | 'float64'
  | 'int8'
  | 'uint8'
  | 'int16'
  | 'uint16'
  | 'int32'
  | 'uint32'
  | 'int64'
  | 'uint64'
  | 'bool'
  | 'float16'
  | 'bfloat16';

export type TypedArray =
  | Float32Array
  | Float64Array
  | Int8Array
  | Uint8Array
  | Int16Array
  | Uint16Array
  | Int32Array
  | Uint32Array
  | BigInt64Array
  | BigUint64Array;

export type TypedArrayConstructor = {
  new (buffer: ArrayBufferLike, byteOffset?: number, length?: number): TypedArray;
  new (length: number): TypedArray;
  readonly BYTES_PER_ELEMENT: number;
};

/** What get() returns and set()/fill() take for a dtype. */
export type Scalar = number | bigint | boolean;

export interface DTypeInfo {
  readonly name: DType;
  readonly itemsize: number;
  readonly array: TypedArrayConstructor;
  /** 'bigint' for int64/uint64, 'bool' for bool, 'half' for the 16-bit floats. */
  readonly kind: 'number' | 'bigint' | 'bool' | 'half';
}

const table: Record<DType, DTypeInfo> = {
  float32: { name: 'float32', itemsize: 4, array: Float32Array, kind: 'number' },
  float64: { name: 'float64', itemsize: 8, array: Float64Array, kind: 'number' },
  int8: { name: 'int8', itemsize: 1, array: Int8Array, kind: 'number' },
  uint8: { name: 'uint8', itemsize: 1, array: Uint8Array, kind: 'number' },
  int16: { name: 'int16', itemsize: 2, array: Int16Array, kind: 'number' },
  uint16: { name: 'uint16', itemsize: 2, array: Uint16Array, kind: 'number' },
  int32: { name: 'int32', itemsize: 4, array: Int32Array, kind: 'number' },
  uint32: { name: 'uint32', itemsize: 4, array: Uint32Array, kind: 'number' },
  int64: { name: 'int64', itemsize: 8, array: BigInt64Array as unknown as TypedArrayConstructor, kind: 'bigint' },
  uint64: { name: 'uint64', itemsize: 8, array: BigUint64Array as unknown as TypedArrayConstructor, kind: 'bigint' },
  bool: { name: 'bool', itemsize: 1, array: Uint8Array, kind: 'bool' },
  float16: { name: 'float16', itemsize: 2, array: Uint16Array, kind: 'half' },
  bfloat16: { name: 'bfloat16', itemsize: 2, array: Uint16Array, kind: 'half' },
};

export const DTYPES: readonly DType[] = Object.keys(table) as DType[];

export function dtypeInfo(dtype: unknown): DTypeInfo {
  const info = typeof dtype === 'string' ? table[dtype as DType] : undefined;
  if (info === undefined || !Object.hasOwn(table, dtype as string)) {
    throw new InvalidDtypeError(`Unknown dtype ${JSON.stringify(dtype)}. Use one of: ${DTYPES.join(', ')}.`);
  }
  return info;
}

/** The dtype a TypedArray holds, for wrapping it without a copy. */
export function dtypeOfArray(a: ArrayBufferView): DType | undefined {
  if (a instanceof Float32Array) return 'float32';
  if (a instanceof Float64Array) return 'float64';
  if (a instanceof Int8Array) return 'int8';
  if (a instanceof Uint8Array) return 'uint8';
  if (a instanceof Int16Array) return 'int16';
  if (a instanceof Uint16Array) return 'uint16';
  if (a instanceof Int32Array) return 'int32';
  if (a instanceof Uint32Array) return 'uint32';
  if (a instanceof BigInt64Array) return 'int64';
  if (a instanceof BigUint64Array) return 'uint64';
  return undefined;
}

// --- 16-bit floats ----------------------------------------------------------------------
const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

export function bfloat16ToNumber(w: number): number {
  u32[0] = w << 16;
  return f32[0]!;
}

export function numberToBfloat16(x: number): number {
  f32[0] = x;
  const bits = u32[0]!;
  if ((bits & 0x7fffffff) > 0x7f800000) return (bits >>> 16) | 0x40; // NaN stays NaN
  // Round to nearest even on the dropped 16 bits.
  return ((bits + 0x7fff + ((bits >>> 16) & 1)) >>> 16) & 0xffff;
}

export function float16ToNumber(w: number): number {
  const sign = w & 0x8000 ? -1 : 1;
  const exp = (w >>> 10) & 0x1f;
  const frac = w & 0x3ff;
  if (exp === 0) return sign * frac * 2 ** -24;
  if (exp === 0x1f) return frac ? NaN : sign * Infinity;
  return sign * (1 + frac / 1024) * 2 ** (exp - 15);
}

export function numberToFloat16(x: number): number {
  f32[0] = x;
  const bits = u32[0]!;
  const sign = (bits >>> 16) & 0x8000;
  const exp = (bits >>> 23) & 0xff;
  let frac = bits & 0x7fffff;
  if (exp === 0xff) return sign | 0x7c00 | (frac ? 0x200 : 0);
  const e = exp - 127 + 15;
  if (e >= 0x1f) return sign | 0x7c00; // overflow: infinity
  if (e <= 0) {
    if (e < -10) return sign; // underflow: signed zero
    frac |= 0x800000;
    const shift = 14 - e;
    let half = frac >>> shift;
    const rem = frac & ((1 << shift) - 1);
    const mid = 1 << (shift - 1);
    if (rem > mid || (rem === mid && half & 1)) half++;
    return sign | half;
  }
  let half = (e << 10) | (frac >>> 13);
  const rem = frac & 0x1fff;
  if (rem > 0x1000 || (rem === 0x1000 && half & 1)) half++;
  return sign | half;
}
