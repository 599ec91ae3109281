// Encoding a message into one frame (NOTE [Frames], frame.ts): a lone tensor in its fixed
// layout, a plain tree (plain-encode.ts), or a VALUE frame, spilled when too large (spill.ts).
import { Tensor } from '../tensor/index.js';
import { exportStorage, abandonExport } from '../sharing/index.js';
import { NotTransferableError, TooManyDescriptorsError, isTensorprocError } from '../errors.js';
import { prepare } from './walk.js';
import { MessageWriter } from './serializer.js';
import { Reducer } from './message-table.js';
import {
  DTYPE_CODE,
  FRAME_VERSION,
  INLINE_MAX,
  KIND_TENSOR,
  KIND_VALUE,
  MAX_FDS,
  MAX_NDIM,
  PIECE_ALIGN,
  STRATEGY_CODE,
  viewsOf,
  type Frame,
} from './wire.js';
import { encodePlain } from './plain-encode.js';
import { spill } from './spill.js';

const scratch = new Uint8Array(8 * (4 + 2 * MAX_NDIM) + 256);
const { view, text: scratchText } = viewsOf(scratch.buffer);
const NO_FDS = new Int32Array(0);
// Frames are sent (or kept, with their own copies) before the next encode: one array serves.
const ONE_FD = new Int32Array(1);
function oneFd(fd: number): Int32Array {
  ONE_FD[0] = fd;
  return ONE_FD;
}

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
    return new NotTransferableError(
      `${what} is nested too deeply to be sent (the stack ran out walking it): flatten it, or send its parts in several messages.`,
      where,
    );
  }
  if (e instanceof TypeError) {
    return new NotTransferableError(
      `${what} cannot be read to be sent (${e.message}): a revoked Proxy, or one whose traps throw. Send plain data instead.`,
      where,
    );
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
  // Over a segment's CPU storage only: a mapped file's travels by its own reduction (NOTE [File
  // storages]), a CUDA tensor as a message (its storage's reduction: NOTE [CUDA chunk lifetime]).
  return value instanceof Tensor && value.shape.length <= MAX_NDIM && value.constructor === Tensor && value.storage.isPlainCpu();
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
  if (!Number.isInteger(units) || units > 0xffff)
    throw new Error(`tensorproc: a storage at byte offset ${offset} of its segment cannot travel in a TENSOR frame`);
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
