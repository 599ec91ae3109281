// A fill value as the bit pattern a device fill takes (no kernels: cuMemsetD8/16/32, and two
// strided 32-bit fills for 8-byte dtypes: native/cuda.cc).
import type { DTypeInfo } from './dtype.js';

export function devicePattern(info: DTypeInfo, raw: number | bigint): { width: number; lo: number; hi: number } {
  const one = new info.array(1) as unknown as (number | bigint)[] & { buffer: ArrayBuffer };
  one[0] = raw;
  const bytes = new DataView(one.buffer);
  switch (info.itemsize) {
    case 1:
      return { width: 1, lo: bytes.getUint8(0), hi: 0 };
    case 2:
      return { width: 2, lo: bytes.getUint16(0, true), hi: 0 };
    case 4:
      return { width: 4, lo: bytes.getUint32(0, true), hi: 0 };
    default:
      return { width: 8, lo: bytes.getUint32(0, true), hi: bytes.getUint32(4, true) };
  }
}
