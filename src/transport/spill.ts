// The spill of a VALUE frame too large for one datagram (NOTE [Frames], frame.ts): the frame
// is written into a shared storage that travels in its place, its descriptor last; the
// receiver reads the inner frame from it and lets it go, and the sender's cache recycles it
// like any segment. Both directions of that one layout.
import { Storage } from '../tensor/index.js';
import { importStorage } from '../sharing/index.js';
import { FrameDecodeError } from '../errors.js';
import type { Reducer, Rebuilder } from './message-table.js';
import { checkHandle, exportForCopies } from './reductions.js';
import { FRAME_VERSION, KIND_SPILL, STRATEGIES, STRATEGY_CODE, readName, viewsOf, type Frame } from './wire.js';

// A spill frame's header: 16 bytes and a segment name (at most 255 bytes).
const header = new Uint8Array(16 + 256);
const { view, text } = viewsOf(header.buffer);

/** A VALUE frame too large for one datagram travels in a shared storage (NOTE [Frames]). */
export function spill(inner: Uint8Array, reducer: Reducer): Frame {
  const storage = Storage.allocate(inner.length, true);
  new Uint8Array(storage.buffer, storage.byteOffset, inner.length).set(inner);
  const { exported, undo } = exportForCopies(storage, reducer.copies);
  storage.release(); // the in-flight reference keeps the segment until the receiver lets go
  reducer.onAbandon(undo);
  const { handle, fd } = exported;
  const name = handle.name;
  header[0] = KIND_SPILL;
  header[1] = FRAME_VERSION;
  header[2] = STRATEGY_CODE[handle.strategy];
  header[3] = name === null ? 0 : name.length;
  view.setUint32(4, inner.length, true);
  view.setFloat64(8, handle.nbytes, true);
  const end = name === null ? 16 : 16 + text.latin1Write(name, 16, header.length - 16);
  // A named segment's fd is the message's witness, which the table may carry already (NOTE
  // [Witnesses of named segments]); a memfd's goes last, where openSpill() takes it.
  const fds = fd === null || (handle.strategy === 'file_system' && reducer.fdList.includes(fd)) ? reducer.fdList : [...reducer.fdList, fd];
  return { bytes: header.subarray(0, end), fds: Int32Array.from(fds), abandon: () => reducer.abandon() };
}

/**
 * The inner frame of a received spill, over its storage, and the release of that storage
 * (once the inner frame is decoded). Takes the spill's descriptor.
 */
export function openSpill(bytes: Uint8Array, dv: DataView, ctx: Rebuilder): { inner: Uint8Array; release(): void } {
  if (bytes.length < 16) throw new FrameDecodeError('A received message is truncated.');
  const length = dv.getUint32(4, true);
  // A spill is never a packed piece (NOTE [Packed small storages]): offset 0.
  const handle = checkHandle(STRATEGIES[bytes[2]!] ?? bytes[2], readName(bytes, 16, bytes[3]!), 0, dv.getFloat64(8, true));
  const fd = handle.strategy === 'file_descriptor' ? ctx.takeFd(ctx.fdCount - 1) : null;
  const storage = importStorage(handle, fd);
  if (length > storage.nbytes) {
    storage.release();
    throw new FrameDecodeError(`A spilled message claims ${length} bytes of a ${storage.nbytes}-byte storage.`);
  }
  return { inner: new Uint8Array(storage.buffer, storage.byteOffset, length), release: () => storage.release() };
}
