// Descriptors held as a set: duplicated all or none, closed once. A frame kept until it can
// be sent (transport/send-backlog.ts), spawn's copies of argument descriptors
// (process/args-encode.ts) and a thread child's own copies of them (process/args.ts) all hold
// their descriptors this way.
import { addon } from './addon.js';

/** Duplicates of `fds`; if one cannot be made, those made are closed and the error thrown. */
export function dupAll(fds: ArrayLike<number>): number[] {
  const out: number[] = [];
  try {
    for (let i = 0; i < fds.length; i++) out.push(addon.dup(fds[i]!));
  } catch (e) {
    for (const fd of out) addon.close(fd);
    throw e;
  }
  return out;
}

/** A function that closes `fds` the first time it is called, and does nothing after. */
export function closeOnce(fds: readonly number[]): () => void {
  let closed = false;
  return () => {
    if (closed) return;
    closed = true;
    for (const fd of fds) addon.close(fd);
  };
}
