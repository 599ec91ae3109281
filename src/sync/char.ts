// Typecode 'c' of Value and Array: one byte, as Python's c_char. Python reads it as a bytes
// object of length 1 (b'x'); here it reads as a one-character string whose code is the byte
// (Latin-1: 'é' is byte 0xe9), and it is written from such a string, a number 0-255, or a
// Uint8Array (a Buffer) of one byte. Anything else is refused before anything is written.
import { InvalidArgumentError } from '../errors.js';
import { describeValue } from '../describe-value.js';

/** The character a stored byte reads as. */
export function readChar(raw: number | bigint): string {
  return String.fromCharCode(Number(raw));
}

/** The byte to store for `v`; InvalidArgumentError for anything that is not one byte. */
export function writeChar(v: unknown): number {
  if (typeof v === 'string' && v.length === 1) {
    const code = v.charCodeAt(0);
    if (code <= 0xff) return code;
  } else if (typeof v === 'number' && Number.isInteger(v) && v >= 0 && v <= 0xff) {
    return v;
  } else if (v instanceof Uint8Array && v.length === 1) {
    return v[0]!;
  }
  throw new InvalidArgumentError(
    `A 'c' Value or Array element holds one byte: a one-character string with a code from 0 to 255 ('x', '\\xe9'), ` +
      `a number from 0 to 255, or a one-byte Uint8Array (got ${describeValue(v)}).`,
  );
}
