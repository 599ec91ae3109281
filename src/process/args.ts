// The one place where spawn arguments become bytes and back. See NOTE [Spawn arguments].
//
// NOTE [Spawn arguments]
// `encodeArgs(args)` turns the argument list into `{bytes, fds}`. `bytes` travels to the child
// in its start message (src/process/messages.ts); `fds` are descriptors the arguments refer
// to (shared-memory segments, queue sockets). A process child receives them at start in
// extra stdio slots: fds[k] is the child's descriptor CHILD_FD_BASE + k, which the child
// bootstrap duplicates (close-on-exec) and hands to `decodeArgs(bytes, fds, false)` in the same
// order. A thread child shares the parent's descriptor table and gets the parent's numbers
// unchanged. Those numbers are spawn's own duplicates, not the objects' descriptors: a
// process may close a kept descriptor of a received segment at any moment (NOTE [Kept
// descriptors]), and the number could then name another file by the time a child takes it.
// spawn closes its duplicates once the children have theirs: a process child when it has
// been started, a thread child (which duplicates the numbers when it decodes them) when it
// says it has (ArgsTakenMessage), or exits.
// The arguments are one message of the transport (src/transport, NOTE [Frames]): tensors,
// queues, pipe ends and events travel as they do in a queue, refused values are named by
// path (`args[1].fn`) before anything is taken. One encoding serves every child: `copies`
// (nprocs) in-flight references are added for each storage. A process child owns the
// descriptors it was given (its bootstrap made them its own); a thread child borrows its
// parent's, so it decodes from duplicates.
// Arguments with no tensorproc object in them (the common case, and W2's) are plain V8
// serializer output, so that a child decodes them without loading the transport, the
// sharing layer and the manager client: that would add tens of milliseconds to every start.
// The first byte says which (PLAIN or FRAME). Encoding is in args-encode.ts (parent side).
import { deserialize } from 'node:v8';

export interface EncodedArgs {
  bytes: Uint8Array;
  /** Owned by the encoding (duplicates): release() closes them. */
  fds: number[];
  /** Takes back the in-flight references of every copy: for arguments no child will receive. */
  abandon(): void;
  /** Closes the descriptors, once the children have their own (or will never start). */
  release(): void;
}

/** The first stdio slot of a process child that holds an argument descriptor (3 is the control channel). */
export const CHILD_FD_BASE = 4;

/** First byte of encoded arguments: plain V8 serializer output, or a transport frame. */
export const PLAIN = 0;
export const FRAME = 1;

/**
 * `borrowed`: the descriptors are the parent's own (a thread child), to be duplicated before use.
 * `loadReductions`: loads every reduction, for framed arguments (given by the child's program).
 */
export async function decodeArgs(
  bytes: Uint8Array,
  fds: readonly number[],
  borrowed: boolean,
  loadReductions: () => Promise<unknown>,
): Promise<unknown[]> {
  let args: unknown;
  if (bytes[0] === PLAIN) {
    args = deserialize(bytes.subarray(1));
  } else {
    // Every reduction, not only the transport's: rebuilding a Queue or an Event needs their
    // reductions registered, and the target may not have imported tensorproc itself. Loaded
    // by the child's program (src/programs/reductions.ts), which stands above the library.
    const { decodeMessage } = await import('../transport/index.js');
    await loadReductions();
    const own = borrowed ? (await import('../native/fds.js')).dupAll(fds) : fds.slice();
    args = decodeMessage(bytes.subarray(1), own);
  }
  if (!Array.isArray(args)) throw new TypeError('The spawn arguments did not decode to an array.');
  return args;
}
