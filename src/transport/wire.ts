// What frames have in common on the wire (NOTE [Frames] in frame.ts): kinds, version, sizes,
// and the codes of dtypes and strategies (fixed here, not taken from another table's order).
import type { DType } from '../tensor/index.js';
import type { SharingStrategy } from '../sharing/index.js';

export const FRAME_VERSION = 1;
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

export const DTYPE_CODES: readonly DType[] = ['float32', 'float64', 'int8', 'uint8', 'int16', 'uint16', 'int32', 'uint32', 'int64', 'uint64', 'bool', 'float16', 'bfloat16'];
export const DTYPE_CODE = new Map<string, number>(DTYPE_CODES.map((d, i) => [d, i]));
export const STRATEGIES: readonly SharingStrategy[] = ['file_descriptor', 'file_system'];
