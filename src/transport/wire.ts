// What frames have in common on the wire (NOTE [Frames] in frame.ts): kinds, version, sizes,
// and the codes of dtypes and strategies (fixed here, not taken from another table's order).
import type { DType } from '../tensor/index.js';
import type { SharingStrategy } from '../sharing/index.js';
import { FrameDecodeError } from '../errors.js';

export const FRAME_VERSION = 2;
/** Packed pieces start at multiples of this in their slab (NOTE [Packed small storages]); TENSOR frames count in it. */
export { PIECE_ALIGN } from '../sharing/packing.js';
export const KIND_VALUE = 1;
export const KIND_TENSOR = 2;
export const KIND_SPILL = 3;
export const KIND_PLAIN = 4;

/** Largest frame sent inline; larger VALUE frames spill (a socket buffer holds ~200 KiB). */
export const INLINE_MAX = 64 * 1024;
/** A receive buffer must hold this many bytes. */
export const MAX_FRAME = INLINE_MAX + 1024;
/** SCM_MAX_FD: descriptors one datagram can carry. */
export const MAX_FDS = 253;
export const MAX_NDIM = 64;

export const DTYPE_CODES: readonly DType[] = [
  'float32',
  'float64',
  'int8',
  'uint8',
  'int16',
  'uint16',
  'int32',
  'uint32',
  'int64',
  'uint64',
  'bool',
  'float16',
  'bfloat16',
];
export const DTYPE_CODE = new Map<string, number>(DTYPE_CODES.map((d, i) => [d, i]));
export const STRATEGIES: readonly SharingStrategy[] = ['file_descriptor', 'file_system'];
/** STRATEGIES inverted: the code a strategy travels as. */
export const STRATEGY_CODE: Readonly<Record<SharingStrategy, number>> = { file_descriptor: 0, file_system: 1 };

// Buffer's native string codecs, without the encoding lookup of write()/toString() (Node has
// had them since its first releases; @types does not list them).
export interface Codecs {
  ucs2Write(s: string, offset: number, length: number): number;
  ucs2Slice(start: number, end: number): string;
  latin1Write(s: string, offset: number, length: number): number;
  latin1Slice(start: number, end: number): string;
}

/** A DataView and a Buffer over the whole of one ArrayBuffer. */
export interface BufferViews {
  readonly buffer: ArrayBufferLike;
  readonly view: DataView;
  readonly text: Codecs;
}

export function viewsOf(buffer: ArrayBufferLike): BufferViews {
  return { buffer, view: new DataView(buffer), text: Buffer.from(buffer as ArrayBuffer) as unknown as Codecs };
}

let received: BufferViews | null = null;

/**
 * The views of the buffer `bytes` lies in. Frames are decoded from one receive buffer per
 * thread (the endpoint's), so the views are made once, not per message, whichever decoder
 * (frame.ts, plain-decode.ts) asks.
 */
export function receivedViews(bytes: Uint8Array): BufferViews {
  if (received === null || received.buffer !== bytes.buffer) received = viewsOf(bytes.buffer);
  return received;
}

/** A frame as it is sent: encodeMessage() makes it (frame-encode.ts), an Endpoint sends it. */
export interface Frame {
  /** Valid until the next encodeMessage() call in this thread: keep() before waiting. */
  readonly bytes: Uint8Array;
  /** Borrowed: open at least until the frame is sent (or kept). */
  readonly fds: Int32Array;
  /** Undoes the in-flight references of a frame that will never be sent. */
  abandon(): void;
}

/** The name of `len` bytes at `at`; null when there is none (len 0). */
export function readName(bytes: Uint8Array, at: number, len: number): string | null {
  if (len === 0) return null;
  if (at + len > bytes.length) throw new FrameDecodeError('A received message is truncated.');
  const from = bytes.byteOffset + at;
  return receivedViews(bytes).text.latin1Slice(from, from + len);
}
