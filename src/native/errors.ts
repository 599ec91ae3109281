// Turns the addon's errno errors into the coded classes of src/errors.ts.
import { ShmFullError, TooManyFilesError, SegmentGoneError, TensorprocSystemError } from '../errors.js';

interface ErrnoLike {
  errno?: number;
  code?: string;
  syscall?: string;
  message?: string;
}

/**
 * Wraps an error thrown by the addon. `what` says what we were doing, in the user's terms
 * ("allocating a 64 MiB shared segment"), so the message names the cause and the fix.
 */
export function systemError(e: unknown, what: string): Error {
  const err = (e ?? {}) as ErrnoLike;
  if (typeof err.code !== 'string' || !err.code.startsWith('E')) return e as Error;
  const base = `${what}: ${err.syscall ?? 'system call'} failed with ${err.code}`;
  switch (err.code) {
    case 'ENOSPC':
    case 'ENOMEM':
      return new ShmFullError(
        `${base}. Shared memory is full: free some (npx tensorproc shm ls / shm clean), ` +
          'release tensors you no longer need, or give /dev/shm more room (docker: --shm-size).',
        err,
      );
    case 'EMFILE':
    case 'ENFILE':
      return new TooManyFilesError(`${base}. The open-file limit is reached: raise it (ulimit -n) or hold fewer descriptors open.`, err);
    case 'ENOENT':
      return new SegmentGoneError(
        `${base}. The shared-memory segment no longer exists: its owner removed it, or its users all exited before it was opened.`,
        err,
      );
    default:
      return new TensorprocSystemError(`${base} (${err.message ?? ''}).`, err);
  }
}
