// The one place where spawn arguments become bytes and back. See NOTE [Spawn arguments].
//
// NOTE [Spawn arguments]
// `encodeArgs(args)` turns the argument list into `{bytes, fds}`. `bytes` travels to the child
// in its start message (src/process/messages.ts); `fds` are descriptors the arguments refer
// to (shared-memory segments, queue sockets). A process child receives them at start in
// extra stdio slots: fds[k] is the child's descriptor CHILD_FD_BASE + k, which the child
// bootstrap duplicates (close-on-exec) and hands to `decodeArgs(bytes, fds)` in the same
// order. A thread child shares the parent's descriptor table and gets the parent's numbers
// unchanged. The descriptors are borrowed: spawn never closes them; the objects in `args`
// that own them keep them open at least until the children have started.
// The arguments are one message of the transport (src/transport, NOTE [Frames]): tensors,
// queues, pipe ends and events travel as they do in a queue, refused values are named by
// path (`args[1].fn`) before anything is taken. One encoding serves every child: `copies`
// (nprocs) in-flight references are added for each storage. A process child owns the
// descriptors it was given (its bootstrap made them its own); a thread child borrows its
// parent's, so it decodes from duplicates.
import { isMainThread } from 'node:worker_threads';
import { addon } from '../native/index.js';
import { encodeMessage, decodeMessage } from '../transport/index.js';
import { InvalidArgumentError } from '../errors.js';

export interface EncodedArgs {
  bytes: Uint8Array;
  fds: number[];
}

/** The first stdio slot of a process child that holds an argument descriptor (3 is the control channel). */
export const CHILD_FD_BASE = 4;

export function encodeArgs(args: readonly unknown[], copies = 1): EncodedArgs {
  const frame = encodeMessage(args, 'args', copies);
  return { bytes: frame.bytes.slice(), fds: Array.from(frame.fds) };
}

export function decodeArgs(bytes: Uint8Array, fds: readonly number[]): unknown[] {
  const own = isMainThread ? fds.slice() : fds.map((fd) => addon.dup(fd));
  const args = decodeMessage(bytes, own);
  if (!Array.isArray(args)) throw new InvalidArgumentError('The spawn arguments did not decode to an array.');
  return args;
}
