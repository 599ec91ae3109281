// Messages as datagrams: encodeMessage() turns a value into one frame (bytes + descriptors),
// decodeMessage() turns a received frame back into a value.
//
// NOTE [Frames]
// One message is always one datagram, whatever its size: with several producers and
// consumers on one socket, the pieces of a message cut into several datagrams could
// interleave with other messages. The first two bytes are the kind and FRAME_VERSION:
//  - TENSOR: a lone tensor, the common case, in a compact fixed layout (no V8 serializer):
//    dtype, shape, stride, offset and its storage handle (the byte offset of a packed piece,
//    NOTE [Packed small storages], in 64-byte units in bytes 6-7); descriptor 0 is the memfd
//    under file_descriptor.
//  - PLAIN: a small tree of plain values and tensors, written directly (NOTE [Plain frames],
//    plain-layout.ts): tuples, dicts, numbers, strings.
//  - VALUE: anything else, as V8 serializer output with the table of NOTE [Message table].
//  - SPILL: a VALUE frame too large for a datagram (INLINE_MAX), written into a shared
//    storage that travels in its place (its descriptor last); the receiver reads the inner
//    frame from it and lets it go, and the sender's cache recycles it like any segment.
// A frame that does not parse is a FrameDecodeError; every descriptor that came with it is
// closed whatever happens (see NOTE [Message table] for who owns what).
import { addon } from '../native/index.js';
import { Tensor, Storage } from '../tensor/index.js';
import { exportStorage, importStorage, abandonExport } from '../sharing/index.js';
import { FrameDecodeError, InvalidShapeError, NotTransferableError, TooManyDescriptorsError, isTensorprocError } from '../errors.js';
import { prepare } from './walk.js';
import { MessageReader, MessageWriter } from './serializer.js';
import { reductionNamed, type Reduction } from './registry.js';
import { Reducer, Rebuilder } from './message-table.js';
import { checkHandle, checkTensorLayout, exportForCopies } from './reductions.js';
import {
  DTYPE_CODE, DTYPE_CODES, FRAME_VERSION, INLINE_MAX, KIND_PLAIN, KIND_SPILL, KIND_TENSOR, KIND_VALUE, MAX_FDS, MAX_NDIM, PIECE_ALIGN, STRATEGIES, STRATEGY_CODE,
  receivedViews, viewsOf,
} from './wire.js';
import { decodePlain } from './plain-decode.js';
import { encodePlain } from './plain-encode.js';

export { FRAME_VERSION, INLINE_MAX, MAX_FRAME, MAX_FDS } from './wire.js';

export interface Frame {
  /** Valid until the next encodeMessage() call in this thread: keep() before waiting. */
  readonly bytes: Uint8Array;
  /** Borrowed: open at least until the frame is sent (or kept). */
  readonly fds: Int32Array;
  /** Undoes the in-flight references of a frame that will never be sent. */
  abandon(): void;
}


const scratch = new Uint8Array(8 * (4 + 2 * MAX_NDIM) + 256);
const { view, text: scratchText } = viewsOf(scratch.buffer);
const NO_FDS = new Int32Array(0);
// Frames are sent (or kept, with their own copies) before the next encode: one array serves.
const ONE_FD = new Int32Array(1);
function oneFd(fd: number): Int32Array {
  ONE_FD[0] = fd;
  return ONE_FD;
}

// --- encoding -------------------------------------------------------------------------

/** Encodes `value` (NOTE [Frames]); refuses what cannot travel before taking any reference. */
export function encodeMessage(value: unknown, path = '', copies = 1): Frame {
  try {
    if (copies === 1) {
      if (isLoneTensor(value)) return encodeTensor(value);
      const plain = encodePlain(value); // NOTE [Plain frames]: null when the value is not one
      if (plain !== null) return plain;
    }
    return encodeValue(value, path, copies);
  } catch (e) {
    throw unreadable(e, path);
  }
}

/**
 * What the engine throws while a message is read (nothing is taken by then, or it was given
 * back: encodeValue), as the NotTransferableError it is: a value nested so deep that the
 * stack runs out, and a revoked Proxy (or one whose traps throw) where even `instanceof`
 * cannot look at it. Errors of ours pass through.
 */
function unreadable(e: unknown, path: string): unknown {
  if (isTensorprocError(e)) return e;
  const where = path === '' ? '(message)' : path.replace(/^\./, '');
  const what = where === '(message)' ? 'The message' : where;
  if (e instanceof RangeError && /call stack/i.test(e.message)) {
    return new NotTransferableError(`${what} is nested too deeply to be sent (the stack ran out walking it): flatten it, or send its parts in several messages.`, where);
  }
  if (e instanceof TypeError) {
    return new NotTransferableError(`${what} cannot be read to be sent (${e.message}): a revoked Proxy, or one whose traps throw. Send plain data instead.`, where);
  }
  return e;
}


/**
 * Throws what encodeMessage() would refuse now, and takes nothing: for a put that must wait
 * for a slot, which would otherwise be refused only once one is free (or time out without
 * ever saying why). For anything but a lone tensor, a trial encoding, abandoned: only it sees
 * everything that refuses a value (a released tensor anywhere, too many descriptors, what
 * V8's serializer will not write). What it leaves is what sending would have done first:
 * tensors moved into shared memory.
 */
export function checkMessage(value: unknown, path = ''): void {
  // A lone tensor (a producer ahead of its consumer puts one after another) can only be
  // refused for being released: no trial on the hot path of a waiting put.
  if (isLoneTensor(value)) value.storage.assertUsable();
  else encodeMessage(value, path).abandon();
}

/** A tensor that travels in a TENSOR frame of its own (NOTE [Frames]). */
function isLoneTensor(value: unknown): value is Tensor {
  return value instanceof Tensor && value.shape.length <= MAX_NDIM && value.constructor === Tensor;
}

// Names are ASCII (segment names, `fd:<dev>:<ino>` keys): one native call writes or reads one.
function writeName(at: number, name: string | null): number {
  if (name === null) return at;
  return at + scratchText.latin1Write(name, at, scratch.length - at);
}

function encodeTensor(t: Tensor): Frame {
  const exported = exportStorage(t.storage);
  const { handle, fd } = exported;
  const ndim = t.shape.length;
  const name = handle.name;
  scratch[0] = KIND_TENSOR;
  scratch[1] = FRAME_VERSION;
  scratch[2] = DTYPE_CODE.get(t.dtype)!;
  scratch[3] = ndim;
  scratch[4] = STRATEGY_CODE[handle.strategy];
  scratch[5] = name === null ? 0 : name.length;
  view.setUint16(6, pieceUnits(handle.offset), true);
  view.setFloat64(8, handle.nbytes, true);
  view.setFloat64(16, t.offset, true);
  let at = 24;
  for (let i = 0; i < ndim; i++, at += 8) view.setFloat64(at, t.shape[i]!, true);
  for (let i = 0; i < ndim; i++, at += 8) view.setFloat64(at, t.stride[i]!, true);
  at = writeName(at, name);
  return {
    bytes: scratch.subarray(0, at),
    fds: fd === null ? NO_FDS : oneFd(fd),
    abandon: () => abandonExport(exported),
  };
}

/** A piece's byte offset as the TENSOR frame carries it: pieces are 64-byte aligned in slabs of 64 KiB (packing.ts). */
function pieceUnits(offset: number): number {
  const units = offset / PIECE_ALIGN;
  if (!Number.isInteger(units) || units > 0xffff) throw new Error(`tensorproc: a storage at byte offset ${offset} of its segment cannot travel in a TENSOR frame`);
  return units;
}

function encodeValue(value: unknown, path: string, copies: number): Frame {
  const walked = prepare(value, path);
  const reducer = new Reducer(walked.objects, copies);
  let bytes: Uint8Array;
  try {
    reducer.reduceAll();
    const w = new MessageWriter();
    w.writeRawBytes(Uint8Array.of(KIND_VALUE, FRAME_VERSION));
    w.writeHeader();
    w.writeUint32(reducer.table.length);
    for (let k = 0; k < reducer.table.length; k++) {
      w.writeValue(reducer.names[k]);
      w.writeValue(reducer.states[k]);
    }
    w.writeValue(walked.root);
    bytes = w.releaseBuffer();
    if (reducer.fdList.length > MAX_FDS - 1) {
      throw new TooManyDescriptorsError(
        `This message would carry ${reducer.fdList.length} descriptors (file_descriptor storages, queues…); one message carries at most ${MAX_FDS - 1}. ` +
          "Stack the tensors into fewer storages, send them in several messages, or use setSharingStrategy('file_system').",
      );
    }
    if (bytes.length > INLINE_MAX) return spill(bytes, reducer);
  } catch (e) {
    reducer.abandon();
    throw e;
  }
  return { bytes, fds: Int32Array.from(reducer.fdList), abandon: () => reducer.abandon() };
}

/** A VALUE frame too large for one datagram travels in a shared storage (NOTE [Frames]). */
function spill(inner: Uint8Array, reducer: Reducer): Frame {
  const storage = Storage.allocate(inner.length, true);
  new Uint8Array(storage.buffer, storage.byteOffset, inner.length).set(inner);
  const { exported, undo } = exportForCopies(storage, reducer.copies);
  storage.release(); // the in-flight reference keeps the segment until the receiver lets go
  reducer.onAbandon(undo);
  const { handle, fd } = exported;
  const name = handle.name;
  scratch[0] = KIND_SPILL;
  scratch[1] = FRAME_VERSION;
  scratch[2] = STRATEGY_CODE[handle.strategy];
  scratch[3] = name === null ? 0 : name.length;
  view.setUint32(4, inner.length, true);
  view.setFloat64(8, handle.nbytes, true);
  const end = writeName(16, name);
  const fds = fd === null ? reducer.fdList : [...reducer.fdList, fd];
  return { bytes: scratch.subarray(0, end), fds: Int32Array.from(fds), abandon: () => reducer.abandon() };
}


// --- decoding -------------------------------------------------------------------------

/**
 * Decodes one received frame. Takes every descriptor in `fds`: those the value keeps are
 * owned by it, the others are closed before this returns or throws.
 */
export function decodeMessage(bytes: Uint8Array, fds: readonly number[]): unknown {
  return decodeAt(bytes, fds, fds.length, 0);
}

/** decodeMessage() for a datagram as the addon's recv() leaves it: `fds[0]` descriptors follow in `fds`. */
export function decodeReceived(bytes: Uint8Array, fds: Int32Array): unknown {
  return decodeAt(bytes, fds, fds[0]!, 1);
}

/**
 * The one dispatch on a frame's kind. `fds` holds the datagram's `count` descriptors from
 * index `first`; a lone tensor, the common case, is decoded without making an array of them.
 */
function decodeAt(bytes: Uint8Array, fds: ArrayLike<number>, count: number, first: number): unknown {
  if (bytes[0] === KIND_TENSOR) return decodeLoneTensor(bytes, fds, count, first);
  if (bytes[0] === KIND_PLAIN) return decodePlainFrame(bytes, fds, count, first);
  const list = new Array<number>(count);
  for (let i = 0; i < count; i++) list[i] = fds[first + i]!;
  const ctx = new Rebuilder(list);
  try {
    return decodeFrame(bytes, ctx, true);
  } catch (e) {
    throw asDecodeError(e);
  } finally {
    ctx.closeUntaken();
  }
}

// A TENSOR frame, without the Rebuilder's bookkeeping: at most one descriptor, and it is
// descriptor 0 (NOTE [Frames]). It only ever travels alone, never inside a spill. `fds`
// holds `count` descriptors from index `first`.
function decodeLoneTensor(bytes: Uint8Array, fds: ArrayLike<number>, count: number, first: number): Tensor {
  let fd = count > 0 ? fds[first]! : null;
  try {
    for (let i = 1; i < count; i++) addon.close(fds[first + i]!);
    checkVersion(bytes);
    if (bytes.length < 24) throw new FrameDecodeError('A received tensor message is truncated.');
    const dv = receivedViews(bytes).view;
    const at0 = bytes.byteOffset;
    const dtype = DTYPE_CODES[bytes[2]!];
    if (dtype === undefined) throw new FrameDecodeError(`A received tensor has dtype code ${bytes[2]}.`);
    const ndim = bytes[3]!;
    const nameAt = 24 + 16 * ndim;
    if (nameAt + bytes[5]! > bytes.length) throw new FrameDecodeError('A received tensor message is truncated.');
    const shape = new Array<number>(ndim);
    const stride = new Array<number>(ndim);
    let at = at0 + 24;
    for (let i = 0; i < ndim; i++, at += 8) shape[i] = dv.getFloat64(at, true);
    for (let i = 0; i < ndim; i++, at += 8) stride[i] = dv.getFloat64(at, true);
    const offset = dv.getFloat64(at0 + 16, true);
    checkTensorLayout(shape, stride, offset);
    const handle = checkHandle(STRATEGIES[bytes[4]!] ?? bytes[4], readName(bytes, nameAt, bytes[5]!), dv.getUint16(at0 + 6, true) * PIECE_ALIGN, dv.getFloat64(at0 + 8, true));
    if (handle.strategy === 'file_descriptor' && fd === null) throw new FrameDecodeError('A received file_descriptor tensor came without its descriptor.');
    const taken = fd;
    fd = null; // importStorage takes it (and closes one a file_system handle does not need), whatever happens
    return new Tensor(importStorage(handle, taken), dtype, shape, stride, offset);
  } catch (e) {
    if (fd !== null) addon.close(fd);
    throw asDecodeError(e);
  }
}

/** A PLAIN frame (NOTE [Plain frames]); takes every descriptor, as decodeMessage() does. */
function decodePlainFrame(bytes: Uint8Array, fds: ArrayLike<number>, count: number, first: number): unknown {
  try {
    checkVersion(bytes);
  } catch (e) {
    for (let i = 0; i < count; i++) addon.close(fds[first + i]!);
    throw e;
  }
  try {
    return decodePlain(bytes, fds, count, first);
  } catch (e) {
    throw asDecodeError(e);
  }
}

function asDecodeError(e: unknown): Error {
  // A layout that does not fit its storage came from the frame, not from a caller.
  if (e instanceof InvalidShapeError) return new FrameDecodeError(`A received tensor does not fit its storage (${e.message}): the message is corrupt.`);
  if (isTensorprocError(e)) return e;
  return new FrameDecodeError(`A received message could not be decoded (${(e as Error)?.message ?? String(e)}): it is corrupt, or was not sent by this version of tensorproc.`);
}

function checkVersion(bytes: Uint8Array): void {
  if (bytes.length < 2) throw new FrameDecodeError(`A received message is ${bytes.length} bytes long, too short for a frame.`);
  if (bytes[1] !== FRAME_VERSION) throw new FrameDecodeError(`A received message has frame version ${bytes[1]}, this tensorproc reads ${FRAME_VERSION}: are both sides the same version?`);
}

function decodeFrame(bytes: Uint8Array, ctx: Rebuilder, outer: boolean): unknown {
  checkVersion(bytes);
  const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  switch (bytes[0]) {
    case KIND_VALUE:
      return decodeValue(bytes.subarray(2), ctx);
    case KIND_SPILL:
      if (!outer) break;
      return decodeSpill(bytes, dv, ctx);
  }
  throw new FrameDecodeError(`A received message has an unknown frame kind ${bytes[0]}.`);
}

/** The name of `len` bytes at `at`; null when there is none (len 0). */
function readName(bytes: Uint8Array, at: number, len: number): string | null {
  if (len === 0) return null;
  if (at + len > bytes.length) throw new FrameDecodeError('A received message is truncated.');
  const from = bytes.byteOffset + at;
  return receivedViews(bytes).text.latin1Slice(from, from + len);
}


function decodeValue(body: Uint8Array, ctx: Rebuilder): unknown {
  const reader = new MessageReader(body);
  if (!reader.readHeader()) throw new FrameDecodeError('A received message has no serializer header.');
  const n = reader.readUint32();
  if (n > body.length) throw new FrameDecodeError(`A received message claims ${n} objects in ${body.length} bytes.`);
  const pending: { r: Reduction; state: unknown }[] = [];
  for (let k = 0; k < n; k++) {
    const name = reader.readValue();
    const r = typeof name === 'string' ? reductionNamed(name) : undefined;
    if (r === undefined) throw new FrameDecodeError(`A received message holds an object of unknown type ${JSON.stringify(String(name)).slice(0, 80)}.`);
    pending.push({ r, state: reader.readValue() });
  }
  ctx.rebuildAll(pending);
  reader.objects = ctx.objects;
  return reader.readValue();
}

function decodeSpill(bytes: Uint8Array, dv: DataView, ctx: Rebuilder): unknown {
  if (bytes.length < 16) throw new FrameDecodeError('A received message is truncated.');
  const length = dv.getUint32(4, true);
  // A spill is never a packed piece (NOTE [Packed small storages]): offset 0.
  const handle = checkHandle(STRATEGIES[bytes[2]!] ?? bytes[2], readName(bytes, 16, bytes[3]!), 0, dv.getFloat64(8, true));
  const fd = handle.strategy === 'file_descriptor' ? ctx.takeFd(ctx.fdCount - 1) : null;
  const storage = importStorage(handle, fd);
  try {
    if (length > storage.nbytes) throw new FrameDecodeError(`A spilled message claims ${length} bytes of a ${storage.nbytes}-byte storage.`);
    return decodeFrame(new Uint8Array(storage.buffer, storage.byteOffset, length), ctx, false);
  } finally {
    storage.release();
  }
}
