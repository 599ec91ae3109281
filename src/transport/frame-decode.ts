// Decoding a received frame back into a value (NOTE [Frames], frame.ts): the one dispatch on
// its kind, a lone tensor without the table's bookkeeping, plain trees (plain-decode.ts),
// VALUE frames through the message table, and spilled ones (spill.ts).
import { addon } from '../native/index.js';
import { Tensor } from '../tensor/index.js';
import { importStorage } from '../sharing/index.js';
import { FrameDecodeError, InvalidShapeError, isTensorprocError } from '../errors.js';
import { MessageReader } from './serializer.js';
import { reductionNamed, type Reduction } from './registry.js';
import { Rebuilder } from './message-table.js';
import { checkHandle, checkTensorLayout } from './reductions.js';
import {
  DTYPE_CODES,
  FRAME_VERSION,
  KIND_PLAIN,
  KIND_SPILL,
  KIND_TENSOR,
  KIND_VALUE,
  PIECE_ALIGN,
  STRATEGIES,
  readName,
  receivedViews,
} from './wire.js';
import { decodePlain } from './plain-decode.js';
import { openSpill } from './spill.js';

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
    const handle = checkHandle(
      STRATEGIES[bytes[4]!] ?? bytes[4],
      readName(bytes, nameAt, bytes[5]!),
      dv.getUint16(at0 + 6, true) * PIECE_ALIGN,
      dv.getFloat64(at0 + 8, true),
    );
    if (handle.strategy === 'file_descriptor' && fd === null)
      throw new FrameDecodeError('A received file_descriptor tensor came without its descriptor.');
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
  if (e instanceof InvalidShapeError)
    return new FrameDecodeError(`A received tensor does not fit its storage (${e.message}): the message is corrupt.`);
  if (isTensorprocError(e)) return e;
  return new FrameDecodeError(
    `A received message could not be decoded (${(e as Error)?.message ?? String(e)}): it is corrupt, or was not sent by this version of tensorproc.`,
  );
}

function checkVersion(bytes: Uint8Array): void {
  if (bytes.length < 2) throw new FrameDecodeError(`A received message is ${bytes.length} bytes long, too short for a frame.`);
  if (bytes[1] !== FRAME_VERSION)
    throw new FrameDecodeError(
      `A received message has frame version ${bytes[1]}, this tensorproc reads ${FRAME_VERSION}: are both sides the same version?`,
    );
}

function decodeFrame(bytes: Uint8Array, ctx: Rebuilder, outer: boolean): unknown {
  checkVersion(bytes);
  const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  switch (bytes[0]) {
    case KIND_VALUE:
      return decodeValue(bytes.subarray(2), ctx);
    case KIND_SPILL: {
      if (!outer) break;
      const spilled = openSpill(bytes, dv, ctx);
      try {
        return decodeFrame(spilled.inner, ctx, false);
      } finally {
        spilled.release();
      }
    }
  }
  throw new FrameDecodeError(`A received message has an unknown frame kind ${bytes[0]}.`);
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
    if (r === undefined)
      throw new FrameDecodeError(`A received message holds an object of unknown type ${JSON.stringify(String(name)).slice(0, 80)}.`);
    pending.push({ r, state: reader.readValue() });
  }
  ctx.rebuildAll(pending);
  reader.objects = ctx.objects;
  return reader.readValue();
}
