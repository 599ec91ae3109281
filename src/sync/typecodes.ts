// Python's typecodes (those of the array module and multiprocessing.Value/Array, with the
// sizes they have on 64-bit Linux) as dtypes. A dtype name is taken as it is.
import { InvalidDtypeError } from '../errors.js';
import { DTYPES, dtypeInfo, type DType } from '../tensor/index.js';
import type { DTypeInfo } from '../tensor/dtype.js';

const TYPECODES: Readonly<Record<string, DType>> = {
  b: 'int8',
  B: 'uint8',
  h: 'int16',
  H: 'uint16',
  i: 'int32',
  I: 'uint32',
  l: 'int64',
  L: 'uint64',
  q: 'int64',
  Q: 'uint64',
  f: 'float32',
  d: 'float64',
  '?': 'bool',
  c: 'uint8', // bytes, read as one-character strings (see char.ts)
};

/** A typecode or dtype. */
export type Typecode = DType | 'b' | 'B' | 'h' | 'H' | 'i' | 'I' | 'l' | 'L' | 'q' | 'Q' | 'f' | 'd' | '?' | 'c';

export function typecodeInfo(type: unknown): DTypeInfo {
  if (typeof type === 'string' && Object.hasOwn(TYPECODES, type)) return dtypeInfo(TYPECODES[type]);
  if (typeof type === 'string' && (DTYPES as readonly string[]).includes(type)) return dtypeInfo(type);
  throw new InvalidDtypeError(
    `Unknown typecode or dtype ${JSON.stringify(type)}. Use a typecode (${Object.keys(TYPECODES).join(' ')}) or a dtype (${DTYPES.join(', ')}).`,
  );
}
