// PLAIN frames: small trees of plain values and tensors, written and read directly.
//
// NOTE [Plain frames]
// Most messages are small trees of plain values: a tuple [x, y], a dict {input, label}, a
// number. A VALUE frame goes through V8's serializer, whose Node wrapper alone costs a few µs
// a message (a native object, its buffer, the copy out of it: 2.8 µs for [k, 2k] here, and
// 1.7 µs to read it back), on top of the walk and the table. A PLAIN frame writes such a tree
// itself into one buffer: undefined, null, booleans, numbers, strings, arrays, plain objects,
// and tensors.
// Only what this layout represents exactly takes this path. The encoder gives up, and the
// VALUE path (the reference for structured-clone semantics) takes the message, at anything
// else: a bigint, a Date, a Map, a typed array, a Proxy, an arguments object, a module
// namespace, a class instance, a Queue; an object met twice (shared or cyclic: structured
// clone keeps the sharing); an array with holes, hidden elements or extra properties; more
// than MAX_NODES objects, MAX_DEPTH levels, MAX_ITEMS entries in one container, or INLINE_MAX
// bytes. It also gives up when entered again while it writes (a getter that sends a message).
// A getter read before the encoder gives up is read again by the VALUE path (which itself
// reads getters twice: its walk, then the serializer).
// Known gap: a built-in object whose prototype was replaced by Object.prototype or null (a
// Map made to look plain) travels as the plain object it looks like.
// Storages: the walk only notes each distinct storage; once it has succeeded, each is exported
// once (one reference in flight, one descriptor) and listed in a table after the tree, which
// tensor records refer to by index. So nothing is taken for a message that then goes the VALUE
// way, views of one storage cost one descriptor, and they arrive over one storage. The
// receiver reads the table first and imports every entry (those after a failed one are
// imported and dropped, as the VALUE path's discard does, so that no reference stays in
// flight), then the tree.
// Layout: [KIND_PLAIN, FRAME_VERSION, u32 offset of the table], the tree, the table. Numbers
// are little-endian. Tree values, a tag byte first:
//   0 undefined · 1 null · 2 false · 3 true · 4 int32 · 5 float64 · 6 string: u32 length in
//   UTF-16 units, then UTF-16LE (exact for any JS string) · 7 array: u32 length, then each
//   element · 8 object: u32 count, then per property its key (a string without tag) and its
//   value · 9 tensor: dtype, ndim, u16 storage index; f64 offset, shape…, stride….
// Table: u16 count, then per storage: strategy, name length, u16 descriptor index (0xffff:
// none), f64 nbytes, the name in latin1. Descriptors are the datagram's, one per
// file_descriptor storage.
import { types } from 'node:util';
import { Tensor, type Storage } from '../tensor/index.js';
import { abandonExport, exportStorage, importStorage, type ExportedStorage, type StorageHandle } from '../sharing/index.js';
import { FrameDecodeError } from '../errors.js';
import { addon } from '../native/index.js';
import { checkHandle, checkTensorLayout } from './reductions.js';
import {
  DTYPE_CODE, DTYPE_CODES, FRAME_VERSION, INLINE_MAX, KIND_PLAIN, MAX_FDS, MAX_NDIM, STRATEGIES, STRATEGY_CODE, receivedViews, viewsOf, type Codecs,
} from './wire.js';
import type { Frame } from './frame.js';

const MAX_NODES = 256;
const MAX_DEPTH = 32;
const MAX_ITEMS = 1024;
const NO_FD = 0xffff;
const HEAD = 6;
const T_UNDEFINED = 0, T_NULL = 1, T_FALSE = 2, T_TRUE = 3, T_INT = 4, T_FLOAT = 5, T_STRING = 6, T_ARRAY = 7, T_OBJECT = 8, T_TENSOR = 9;
/** A table entry: strategy, name length, descriptor index, nbytes, byte offset (uint32: NOTE [Packed small storages]); then the name. */
const ENTRY = 16;

// --- encoding ---------------------------------------------------------------------------

// One output buffer per thread: a frame is sent (or kept, copied) before the next encode.
const out = new Uint8Array(INLINE_MAX);
const { view: outView, text: outText } = viewsOf(out.buffer);
let at = 0;
let nodes = 0;
let writing = false;
const seen: object[] = [];
const storages: Storage[] = [];
const NO_FDS = new Int32Array(0);
const NOTHING_TO_UNDO = (): void => {};

/** Thrown inside writeTable() to give the message to the VALUE path (a name too long to list). */
const GIVE_UP: unique symbol = Symbol('not plain');


/**
 * The PLAIN frame of `value`, or null when it is not one (NOTE [Plain frames]); then nothing
 * was taken. An error while exporting a storage (no room in /dev/shm) is thrown, after the
 * exports made so far are undone.
 */
export function encodePlain(value: unknown): Frame | null {
  if (writing) return null; // a getter of the value being written sends a message
  writing = true;
  at = HEAD;
  nodes = 0;
  seen.length = 0;
  storages.length = 0;
  try {
    if (!write(value, 0)) return null;
    out[0] = KIND_PLAIN;
    out[1] = FRAME_VERSION;
    outView.setUint32(2, at, true);
    if (storages.length > 0) return writeTable();
    outView.setUint16(at, 0, true); // an empty table
    at += 2;
    return finish(NO_FDS, NOTHING_TO_UNDO);
  } finally {
    writing = false;
    seen.length = 0;
    storages.length = 0;
  }
}

function finish(fds: Int32Array, abandon: () => void): Frame {
  return { bytes: out.subarray(0, at), fds, abandon };
}

/** Exports each storage once and lists it after the tree. */
function writeTable(): Frame | null {
  const n = storages.length;
  if (at + 2 + n * (ENTRY + 255) > INLINE_MAX) return null; // names are 255 bytes at most
  const exported: ExportedStorage[] = [];
  const undo = (): void => {
    for (const x of exported.splice(0)) {
      try {
        abandonExport(x);
      } catch {
        // best effort: the others must still be given back
      }
    }
  };
  const fds: number[] = [];
  try {
    outView.setUint16(at, n, true);
    at += 2;
    for (const s of storages) {
      const x = exportStorage(s); // moves it into shared memory first if it is not there
      exported.push(x);
      const name = x.handle.name;
      if (name !== null && name.length > 255) throw GIVE_UP;
      out[at] = STRATEGY_CODE[x.handle.strategy];
      out[at + 1] = name === null ? 0 : name.length;
      outView.setUint16(at + 2, x.fd === null ? NO_FD : fds.length, true);
      outView.setFloat64(at + 4, x.handle.nbytes, true);
      outView.setUint32(at + 12, x.handle.offset, true); // 0, or a piece's in a 64 KiB slab
      if (x.fd !== null) fds.push(x.fd);
      at += ENTRY;
      if (name !== null) at += outText.latin1Write(name, at, name.length);
    }
  } catch (e) {
    undo();
    if (e === GIVE_UP) return null;
    throw e;
  }
  return finish(Int32Array.from(fds), undo);
}

// The walk returns false to give the message to the VALUE path (no exception: giving up is
// the usual case for a VALUE message, and a throw costs more than the walk).

function room(n: number): boolean {
  return at + n <= INLINE_MAX - 2; // the tree leaves room for the table's count
}

function write(v: unknown, depth: number): boolean {
  switch (typeof v) {
    case 'number':
      // -0 is not an int32: it goes as a float64, which keeps its sign.
      if ((v | 0) === v && (v !== 0 || 1 / v > 0)) {
        if (!room(5)) return false;
        out[at] = T_INT;
        outView.setInt32(at + 1, v, true);
        at += 5;
      } else {
        if (!room(9)) return false;
        out[at] = T_FLOAT;
        outView.setFloat64(at + 1, v, true);
        at += 9;
      }
      return true;
    case 'string':
      if (!room(1)) return false;
      out[at++] = T_STRING;
      return writeString(v);
    case 'boolean':
      if (!room(1)) return false;
      out[at++] = v ? T_TRUE : T_FALSE;
      return true;
    case 'undefined':
      if (!room(1)) return false;
      out[at++] = T_UNDEFINED;
      return true;
    case 'object':
      if (v !== null) return writeObject(v, depth);
      if (!room(1)) return false;
      out[at++] = T_NULL;
      return true;
    default:
      // bigint: the VALUE path carries it; a symbol or function: it refuses it, naming where.
      return false;
  }
}

function writeString(s: string): boolean {
  const n = s.length;
  if (!room(4 + 2 * n)) return false;
  outView.setUint32(at, n, true);
  at += 4;
  at += outText.ucs2Write(s, at, 2 * n);
  return true;
}

function writeObject(v: object, depth: number): boolean {
  if (++nodes > MAX_NODES || depth >= MAX_DEPTH) return false;
  for (let i = 0; i < seen.length; i++) if (seen[i] === v) return false;
  seen.push(v);
  if (types.isProxy(v)) return false;
  const proto = Object.getPrototypeOf(v);
  if (Array.isArray(v)) return proto === Array.prototype && writeArray(v, depth);
  if (proto === Object.prototype ? !types.isArgumentsObject(v) : proto === null && !types.isModuleNamespaceObject(v)) {
    return writePlainObject(v as Record<string, unknown>, depth);
  }
  return proto === Tensor.prototype && writeTensor(v as Tensor);
}

function writeArray(a: unknown[], depth: number): boolean {
  const n = a.length;
  if (n > MAX_ITEMS) return false;
  // Index keys come first, ascending: n keys ending with n-1 are exactly 0…n-1, all own and
  // enumerable (no hole, no hidden element), and no other property.
  const keys = Object.keys(a);
  if (keys.length !== n || (n > 0 && keys[n - 1] !== String(n - 1))) return false;
  if (!room(5)) return false;
  out[at] = T_ARRAY;
  outView.setUint32(at + 1, n, true);
  at += 5;
  for (let i = 0; i < n; i++) {
    const x = a[i];
    if (x === undefined && !Object.hasOwn(a, i)) return false; // deleted by a getter meanwhile
    if (!write(x, depth + 1)) return false;
  }
  return true;
}

function writePlainObject(o: Record<string, unknown>, depth: number): boolean {
  const keys = Object.keys(o);
  if (keys.length > MAX_ITEMS || !room(5)) return false;
  out[at] = T_OBJECT;
  outView.setUint32(at + 1, keys.length, true);
  at += 5;
  for (const k of keys) {
    const x = o[k];
    // A property deleted by a getter meanwhile: structured clone skips it.
    if ((x === undefined || k === '__proto__') && !Object.hasOwn(o, k)) return false;
    if (!writeString(k) || !write(x, depth + 1)) return false;
  }
  return true;
}

function writeTensor(t: Tensor): boolean {
  const ndim = t.shape.length;
  // A released tensor: the VALUE path refuses it with its own error.
  if (ndim > MAX_NDIM || t.storage.isReleased()) return false;
  let index = storages.indexOf(t.storage);
  if (index < 0) {
    // The VALUE path keeps one descriptor for a spill, and refuses more, with its own error.
    if (storages.length >= MAX_FDS - 1) return false;
    index = storages.length;
    storages.push(t.storage);
  }
  if (!room(13 + 16 * ndim)) return false;
  out[at] = T_TENSOR;
  out[at + 1] = DTYPE_CODE.get(t.dtype)!;
  out[at + 2] = ndim;
  outView.setUint16(at + 3, index, true);
  outView.setFloat64(at + 5, t.offset, true);
  at += 13;
  for (let i = 0; i < ndim; i++, at += 8) outView.setFloat64(at, t.shape[i]!, true);
  for (let i = 0; i < ndim; i++, at += 8) outView.setFloat64(at, t.stride[i]!, true);
  return true;
}

// --- decoding ---------------------------------------------------------------------------

let src: Uint8Array = out;
let srcView: DataView = outView;
let srcText: Codecs = outText;
let pos = 0;
let end = 0;
// The table of the frame being decoded, reused from one to the next: its handles and
// descriptor indices, then the storages they became.
const tableHandles: StorageHandle[] = [];
const tableFds: number[] = [];
const imported: Storage[] = [];
// Per descriptor of the datagram being decoded: unused, claimed by a table entry, or taken by
// importStorage(); all but the taken are closed at the end.
const FD_UNUSED = 0, FD_CLAIMED = 1, FD_TAKEN = 2;
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
    return value;
  } finally {
    tableHandles.length = 0;
    tableFds.length = 0;
    imported.length = 0;
    for (let i = 0; i < count; i++) {
      if (state[i] === FD_TAKEN) continue;
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
        throw new FrameDecodeError(`A received storage refers to descriptor ${fdIndex} but the message carries ${count} (or uses one twice).`);
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
