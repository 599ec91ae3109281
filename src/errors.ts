// Every error a user can cause, in one table. Each class has a stable `code` (ERR_TP_*) that
// callers may switch on; messages say what was wrong and what to do. Classes extend the
// built-in that fits (TypeError for a wrong kind of value, RangeError for a value out of
// range), so `instanceof TypeError` keeps working for code that predates tensorproc.

export interface CodedError extends Error {
  readonly code: string;
}

/** True for any error thrown by tensorproc (every one has an ERR_TP_* code). */
export function isTensorprocError(e: unknown): e is CodedError {
  return e instanceof Error && typeof (e as CodedError).code === 'string' && (e as CodedError).code.startsWith('ERR_TP_');
}

// --- sharing strategies ----------------------------------------------------------------
export class InvalidStrategyError extends TypeError {
  readonly code = 'ERR_TP_INVALID_STRATEGY';
  override name = 'InvalidStrategyError';
}

// --- tensors ---------------------------------------------------------------------------
export class InvalidDtypeError extends TypeError {
  readonly code = 'ERR_TP_INVALID_DTYPE';
  override name = 'InvalidDtypeError';
}
export class InvalidShapeError extends RangeError {
  readonly code = 'ERR_TP_INVALID_SHAPE';
  override name = 'InvalidShapeError';
}
export class IndexOutOfRangeError extends RangeError {
  readonly code = 'ERR_TP_INDEX_OUT_OF_RANGE';
  override name = 'IndexOutOfRangeError';
}
export class InvalidArgumentError extends TypeError {
  readonly code = 'ERR_TP_INVALID_ARGUMENT';
  override name = 'InvalidArgumentError';
}
export class NotContiguousError extends Error {
  readonly code = 'ERR_TP_NOT_CONTIGUOUS';
  override name = 'NotContiguousError';
}
export class ReleasedError extends Error {
  readonly code = 'ERR_TP_RELEASED';
  override name = 'ReleasedError';
}

// --- shared memory and the system -------------------------------------------------------
/** A system call failed. `errno` (negative, as in Node), `syscall` and `errnoName` say which. */
export class TensorprocSystemError extends Error {
  readonly code: string = 'ERR_TP_SYSTEM';
  override name = 'TensorprocSystemError';
  readonly errno: number;
  readonly syscall: string;
  readonly errnoName: string;
  constructor(message: string, cause: { errno?: number; syscall?: string; code?: string }) {
    super(message, { cause });
    this.errno = cause.errno ?? 0;
    this.syscall = cause.syscall ?? 'unknown';
    this.errnoName = cause.code ?? 'EUNKNOWN';
  }
}
/** Shared memory (/dev/shm or the memory limit) cannot hold the segment asked for. */
export class ShmFullError extends TensorprocSystemError {
  override readonly code = 'ERR_TP_SHM_FULL';
  override name = 'ShmFullError';
}
/** The open-file limit was reached (EMFILE/ENFILE). */
export class TooManyFilesError extends TensorprocSystemError {
  override readonly code = 'ERR_TP_TOO_MANY_FILES';
  override name = 'TooManyFilesError';
}
/** A received handle names a segment that no longer exists. */
export class SegmentGoneError extends TensorprocSystemError {
  override readonly code = 'ERR_TP_SEGMENT_GONE';
  override name = 'SegmentGoneError';
}
/** A received handle does not fit its segment (claims more bytes than it holds, bad header). */
export class BadHandleError extends Error {
  readonly code = 'ERR_TP_BAD_HANDLE';
  override name = 'BadHandleError';
}
export class AddonError extends Error {
  readonly code = 'ERR_TP_ADDON_MISSING';
  override name = 'AddonError';
}
