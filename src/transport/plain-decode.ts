// PLAIN frames, the decoder: reads a frame plain-encode.ts wrote (NOTE [Plain frames],
// plain-layout.ts), its table first, then the tree.
import { Tensor, type Storage } from '../tensor/index.js';
import { importStorage, retireWitness, type StorageHandle } from '../sharing/index.js';
import { FrameDecodeError } from '../errors.js';
import { addon } from '../native/index.js';
import { checkHandle, checkTensorLayout } from './reductions.js';
import { DTYPE_CODES, INLINE_MAX, MAX_FDS, MAX_NDIM, STRATEGIES, receivedViews, viewsOf } from './wire.js';
import {
  ENTRY,
  HEAD,
  MAX_DEPTH,
  MAX_ITEMS,
  T_ARRAY,
  T_FALSE,
  T_FLOAT,
  T_INT,
  T_NULL,
  T_OBJECT,
  T_STRING,
  T_TENSOR,
  T_TRUE,
  T_UNDEFINED,
} from './plain-layout.js';

// The frame being decoded, and views of its buffer (made again only when the buffer changes).
let src: Uint8Array = new Uint8Array(0);
let { view: srcView, text: srcText } = viewsOf(src.buffer);
let pos = 0;
let end = 0;
// The table of the frame being decoded, reused from one to the next: its handles and
// descriptor indices, then the storages they became.
const tableHandles: StorageHandle[] = [];
const tableFds: number[] = [];
const imported: Storage[] = [];
// Per descriptor of the datagram being decoded: unused, claimed by a table entry, or taken by
// importStorage(); all but the taken are closed at the end.
const FD_UNUSED = 0,
  FD_CLAIMED = 1,
  FD_TAKEN = 2;
let fdState = new Uint8Array(MAX_FDS);

function truncated(): FrameDecodeError {
  return new FrameDecodeError('A received message is truncated.');
}

function need(n: number): void {
  if (pos + n > end) throw truncated();
}

/**
 * Decodes a PLAIN frame (its kind and version already checked). `fds` holds the datagram's
 * `count` descriptors from index `first`; every one is taken by a storage or closed here.
 */
export function decodePlain(bytes: Uint8Array, fds: ArrayLike<number>, count: number, first: number): unknown {
  if (count > fdState.length) fdState = new Uint8Array(count);
  const state = fdState;
  state.fill(FD_UNUSED, 0, count);
  let decoded = false;
  try {
    if (bytes.buffer !== src.buffer) ({ view: srcView, text: srcText } = receivedViews(bytes));
    src = bytes;
    if (bytes.length < HEAD) throw truncated();
    const tableAt = srcView.getUint32(bytes.byteOffset + 2, true);
    if (tableAt < HEAD || tableAt > bytes.length) throw new FrameDecodeError('A received message has a malformed table offset.');
    // The table: every entry read and checked before anything is imported.
    pos = tableAt;
    end = bytes.length;
    readTable(count, state);
    if (pos !== end) throw new FrameDecodeError('A received message has bytes after its table.');
    importAll(fds, first, state);
    // The tree: storages imported already are dropped with it if it does not parse, and the
    // collector gives them back (NOTE [Lease buffers and the finalizer]).
    pos = HEAD;
    end = tableAt;
    const value = read(0);
    if (pos !== end) throw new FrameDecodeError('A received message has bytes after its value.');
    decoded = true;
    return value;
  } finally {
    tableHandles.length = 0;
    tableFds.length = 0;
    imported.length = 0;
    for (let i = 0; i < count; i++) {
      if (state[i] === FD_TAKEN) continue;
      // In a message that decoded, one no entry refers to is its witness (NOTE [Witnesses of
      // named segments]), closed with others (NOTE [Witness bin]).
      if (decoded && state[i] === FD_UNUSED) {
        retireWitness(fds[first + i]!);
        continue;
      }
      try {
        addon.close(fds[first + i]!);
      } catch {
        // already closed
      }
    }
  }
}

function readTable(count: number, state: Uint8Array): void {
  need(2);
  const n = srcView.getUint16(src.byteOffset + pos, true);
  pos += 2;
  for (let k = 0; k < n; k++) {
    need(ENTRY);
    const at0 = src.byteOffset + pos;
    const strategyCode = src[pos]!;
    const nameLength = src[pos + 1]!;
    const fdIndex = srcView.getUint16(at0 + 2, true);
    const nbytes = srcView.getFloat64(at0 + 4, true);
    const offset = srcView.getUint32(at0 + 12, true);
    pos += ENTRY;
    need(nameLength);
    const name = nameLength === 0 ? null : srcText.latin1Slice(src.byteOffset + pos, src.byteOffset + pos + nameLength);
    pos += nameLength;
    const handle = checkHandle(STRATEGIES[strategyCode] ?? strategyCode, name, offset, nbytes);
    if (handle.strategy === 'file_descriptor') {
      if (fdIndex >= count || state[fdIndex] !== FD_UNUSED) {
        throw new FrameDecodeError(
          `A received storage refers to descriptor ${fdIndex} but the message carries ${count} (or uses one twice).`,
        );
      }
      state[fdIndex] = FD_CLAIMED;
    }
    tableHandles.push(handle);
    tableFds.push(fdIndex);
  }
}

/**
 * Imports every entry. After a failure the rest are imported and dropped all the same, so that
 * their references in flight are adopted (and given back by the collector), then it throws.
 */
function importAll(fds: ArrayLike<number>, first: number, state: Uint8Array): void {
  let failure: unknown = null;
  for (let k = 0; k < tableHandles.length; k++) {
    const handle = tableHandles[k]!;
    const fdIndex = tableFds[k]!;
    let fd: number | null = null;
    if (handle.strategy === 'file_descriptor') {
      state[fdIndex] = FD_TAKEN;
      fd = fds[first + fdIndex]!;
    }
    try {
      imported.push(importStorage(handle, fd)); // takes fd, whatever happens
    } catch (e) {
      failure ??= e;
    }
  }
  if (failure !== null) throw failure;
}

function read(depth: number): unknown {
  need(1);
  const tag = src[pos++];
  switch (tag) {
    case T_UNDEFINED:
      return undefined;
    case T_NULL:
      return null;
    case T_FALSE:
      return false;
    case T_TRUE:
      return true;
    case T_INT: {
      need(4);
      const v = srcView.getInt32(src.byteOffset + pos, true);
      pos += 4;
      return v;
    }
    case T_FLOAT: {
      need(8);
      const v = srcView.getFloat64(src.byteOffset + pos, true);
      pos += 8;
      return v;
    }
    case T_STRING:
      return readString();
    case T_ARRAY: {
      if (depth >= MAX_DEPTH) throw new FrameDecodeError('A received message nests too deep.');
      const n = readCount();
      const a: unknown[] = [];
      for (let i = 0; i < n; i++) a.push(read(depth + 1));
      return a;
    }
    case T_OBJECT: {
      if (depth >= MAX_DEPTH) throw new FrameDecodeError('A received message nests too deep.');
      const n = readCount();
      const o: Record<string, unknown> = {};
      for (let i = 0; i < n; i++) {
        const k = readString();
        const v = read(depth + 1);
        // A key Object.prototype has (__proto__, toString…) becomes an own property, as
        // structured clone makes it, without running an inherited setter.
        if (k in o) Object.defineProperty(o, k, { value: v, writable: true, enumerable: true, configurable: true });
        else o[k] = v;
      }
      return o;
    }
    case T_TENSOR:
      return readTensor();
  }
  throw new FrameDecodeError(`A received message holds a value of unknown tag ${tag}.`);
}

function readCount(): number {
  need(4);
  const n = srcView.getUint32(src.byteOffset + pos, true);
  pos += 4;
  if (n > MAX_ITEMS) throw new FrameDecodeError(`A received message claims a container of ${n} entries.`);
  return n;
}

function readString(): string {
  need(4);
  const n = srcView.getUint32(src.byteOffset + pos, true);
  pos += 4;
  if (n > INLINE_MAX) throw truncated();
  need(2 * n);
  const from = src.byteOffset + pos;
  pos += 2 * n;
  return srcText.ucs2Slice(from, from + 2 * n);
}

function readTensor(): Tensor {
  need(12);
  const at0 = src.byteOffset + pos;
  const dtype = DTYPE_CODES[src[pos]!];
  const ndim = src[pos + 1]!;
  const index = srcView.getUint16(at0 + 2, true);
  const offset = srcView.getFloat64(at0 + 4, true);
  pos += 12;
  if (dtype === undefined) throw new FrameDecodeError(`A received tensor has dtype code ${src[pos - 12]}.`);
  if (ndim > MAX_NDIM) throw new FrameDecodeError(`A received tensor claims ${ndim} dimensions.`);
  const storage = imported[index];
  if (storage === undefined) throw new FrameDecodeError(`A received tensor refers to storage ${index} of a table of ${imported.length}.`);
  need(16 * ndim);
  const shape = new Array<number>(ndim);
  const stride = new Array<number>(ndim);
  for (let i = 0; i < ndim; i++, pos += 8) shape[i] = srcView.getFloat64(src.byteOffset + pos, true);
  for (let i = 0; i < ndim; i++, pos += 8) stride[i] = srcView.getFloat64(src.byteOffset + pos, true);
  checkTensorLayout(shape, stride, offset);
  return new Tensor(storage, dtype, shape, stride, offset);
}
