// PLAIN frames: small trees of plain values and tensors, written and read directly.
//
// NOTE [Plain frames]
// Most messages are small trees of plain values: a tuple [x, y], a dict {input, label}, a
// number. A VALUE frame goes through V8's serializer, whose Node wrapper alone costs a few µs
// a message (a native object, its buffer, the copy out of it: 2.8 µs for [k, 2k] here, and
// 1.7 µs to read it back), on top of the walk and the table. A PLAIN frame writes such a tree
// itself, in one pass over the value, into one buffer: undefined, null, booleans, numbers,
// strings, arrays, plain objects, and tensors (each a record like a lone TENSOR frame, with its
// own storage handle and descriptor: two views of one storage still arrive over one storage,
// because importStorage() finds the storage the first view brought).
// Only what this layout represents exactly takes this path. The encoder gives up, and the
// VALUE path (the reference for structured-clone semantics) takes the message, at anything
// else: a bigint, a Date, a Map, a typed array, a Proxy, a class instance, a Queue; an object
// met twice (shared or cyclic: structured clone keeps the sharing); an array with holes or
// extra properties; more than MAX_NODES objects, MAX_DEPTH levels, MAX_ITEMS entries in one
// container, or INLINE_MAX bytes. Giving up undoes the exports made so far. (A getter met
// before the encoder gives up runs again on the VALUE path.)
// Layout after [KIND_PLAIN, FRAME_VERSION]: one value, a tag byte first; numbers little-endian.
//   0 undefined · 1 null · 2 false · 3 true · 4 int32 · 5 float64 · 6 string: u32 length in
//   UTF-16 units, then UTF-16LE (exact for any JS string) · 7 array: u32 length, then each
//   element · 8 object: u32 count, then per property its key (a string without tag) and its
//   value · 9 tensor: dtype, ndim, strategy, name length, u16 descriptor index (0xffff:
//   none), a pad byte; f64 nbytes, offset, shape…, stride…; the name in latin1.
// Descriptors are the datagram's, one per file_descriptor tensor record, in record order.
import { types } from 'node:util';
import { Tensor } from '../tensor/index.js';
import { abandonExport, exportStorage, importStorage, type ExportedStorage } from '../sharing/index.js';
import { FrameDecodeError } from '../errors.js';
import { addon } from '../native/index.js';
import { checkHandle, checkTensorLayout } from './reductions.js';
import { DTYPE_CODE, DTYPE_CODES, FRAME_VERSION, INLINE_MAX, KIND_PLAIN, MAX_FDS, MAX_NDIM, STRATEGIES } from './wire.js';
import type { Frame } from './frame.js';

const MAX_NODES = 256;
const MAX_DEPTH = 32;
const MAX_ITEMS = 1024;
const NO_FD = 0xffff;
const T_UNDEFINED = 0, T_NULL = 1, T_FALSE = 2, T_TRUE = 3, T_INT = 4, T_FLOAT = 5, T_STRING = 6, T_ARRAY = 7, T_OBJECT = 8, T_TENSOR = 9;

// Buffer's native string codecs, without the encoding lookup of write()/toString() (Node has
// had them since its first releases; @types does not list them).
interface Codecs {
  ucs2Write(s: string, offset: number, length: number): number;
  ucs2Slice(start: number, end: number): string;
  latin1Write(s: string, offset: number, length: number): number;
  latin1Slice(start: number, end: number): string;
}

// --- encoding ---------------------------------------------------------------------------

// One output buffer per thread: a frame is sent (or kept, copied) before the next encode.
const out = new Uint8Array(INLINE_MAX);
const outView = new DataView(out.buffer);
const outText = Buffer.from(out.buffer) as unknown as Codecs;
let at = 0;
let nodes = 0;
const seen: object[] = [];
const exported: ExportedStorage[] = [];
const fdList: number[] = [];
const NO_FDS = new Int32Array(0);
const NOTHING_TO_UNDO = (): void => {};

/** Thrown inside the walk to give the message to the VALUE path. */
const GIVE_UP: unique symbol = Symbol('not plain');

function room(n: number): void {
  if (at + n > INLINE_MAX) throw GIVE_UP;
}

/**
 * The PLAIN frame of `value`, or null when it is not one (NOTE [Plain frames]); then nothing
 * is left behind. Errors of the value itself (a released tensor) are thrown, after the undo.
 */
export function encodePlain(value: unknown): Frame | null {
  at = 2;
  nodes = 0;
  out[0] = KIND_PLAIN;
  out[1] = FRAME_VERSION;
  try {
    write(value, 0);
  } catch (e) {
    for (const x of exported) abandonExport(x);
    exported.length = 0;
    fdList.length = 0;
    seen.length = 0;
    if (e === GIVE_UP) return null;
    throw e;
  }
  seen.length = 0;
  if (exported.length === 0) return { bytes: out.subarray(0, at), fds: NO_FDS, abandon: NOTHING_TO_UNDO };
  const taken = exported.slice();
  const fds = Int32Array.from(fdList);
  exported.length = 0;
  fdList.length = 0;
  return {
    bytes: out.subarray(0, at),
    fds,
    abandon: () => {
      for (const x of taken) abandonExport(x);
    },
  };
}

function write(v: unknown, depth: number): void {
  switch (typeof v) {
    case 'number':
      // -0 is not an int32: it goes as a float64, which keeps its sign.
      if ((v | 0) === v && (v !== 0 || 1 / v > 0)) {
        room(5);
        out[at] = T_INT;
        outView.setInt32(at + 1, v, true);
        at += 5;
      } else {
        room(9);
        out[at] = T_FLOAT;
        outView.setFloat64(at + 1, v, true);
        at += 9;
      }
      return;
    case 'string':
      room(1);
      out[at++] = T_STRING;
      writeString(v);
      return;
    case 'boolean':
      room(1);
      out[at++] = v ? T_TRUE : T_FALSE;
      return;
    case 'undefined':
      room(1);
      out[at++] = T_UNDEFINED;
      return;
    case 'object':
      if (v === null) {
        room(1);
        out[at++] = T_NULL;
      } else {
        writeObject(v, depth);
      }
      return;
    default:
      // bigint: the VALUE path carries it; a symbol or function: it refuses it, naming where.
      throw GIVE_UP;
  }
}

function writeString(s: string): void {
  const n = s.length;
  room(4 + 2 * n);
  outView.setUint32(at, n, true);
  at += 4;
  at += outText.ucs2Write(s, at, 2 * n);
}

function writeObject(v: object, depth: number): void {
  if (++nodes > MAX_NODES || depth >= MAX_DEPTH) throw GIVE_UP;
  for (let i = 0; i < seen.length; i++) if (seen[i] === v) throw GIVE_UP;
  seen.push(v);
  if (types.isProxy(v)) throw GIVE_UP;
  const proto = Object.getPrototypeOf(v);
  if (proto === Array.prototype) {
    const a = v as unknown[];
    const n = a.length;
    // With no hole (checked per undefined element below), as many keys as elements means no
    // extra property either.
    if (n > MAX_ITEMS || Object.keys(a).length !== n) throw GIVE_UP;
    room(5);
    out[at] = T_ARRAY;
    outView.setUint32(at + 1, n, true);
    at += 5;
    for (let i = 0; i < n; i++) {
      const x = a[i];
      if (x === undefined && !(i in a)) throw GIVE_UP;
      write(x, depth + 1);
    }
    return;
  }
  if (proto === Object.prototype || proto === null) {
    const keys = Object.keys(v);
    if (keys.length > MAX_ITEMS) throw GIVE_UP;
    room(5);
    out[at] = T_OBJECT;
    outView.setUint32(at + 1, keys.length, true);
    at += 5;
    for (const k of keys) {
      writeString(k);
      write((v as Record<string, unknown>)[k], depth + 1);
    }
    return;
  }
  if (proto === Tensor.prototype) {
    writeTensor(v as Tensor);
    return;
  }
  throw GIVE_UP;
}

function writeTensor(t: Tensor): void {
  const ndim = t.shape.length;
  // The VALUE path keeps one descriptor for a spill, and refuses more, with its own error.
  if (ndim > MAX_NDIM || fdList.length >= MAX_FDS - 1) throw GIVE_UP;
  room(8 + 16 + 16 * ndim + 255);
  const x = exportStorage(t.storage); // shares it first if it is not shared yet
  exported.push(x);
  const name = x.handle.name;
  if (name !== null && name.length > 255) throw GIVE_UP;
  let fdIndex = NO_FD;
  if (x.fd !== null) {
    fdIndex = fdList.length;
    fdList.push(x.fd);
  }
  out[at] = T_TENSOR;
  out[at + 1] = DTYPE_CODE.get(t.dtype)!;
  out[at + 2] = ndim;
  out[at + 3] = x.handle.strategy === 'file_system' ? 1 : 0;
  out[at + 4] = name === null ? 0 : name.length;
  outView.setUint16(at + 5, fdIndex, true);
  out[at + 7] = 0;
  outView.setFloat64(at + 8, x.handle.nbytes, true);
  outView.setFloat64(at + 16, t.offset, true);
  at += 24;
  for (let i = 0; i < ndim; i++, at += 8) outView.setFloat64(at, t.shape[i]!, true);
  for (let i = 0; i < ndim; i++, at += 8) outView.setFloat64(at, t.stride[i]!, true);
  if (name !== null) at += outText.latin1Write(name, at, name.length);
}

// --- decoding ---------------------------------------------------------------------------

let src: Uint8Array = out;
let srcView: DataView = outView;
let srcText: Codecs = outText;
let pos = 0;
let fdsIn: ArrayLike<number> = NO_FDS;
let fdFirst = 0;
let fdCount = 0;
let fdTaken = new Uint8Array(MAX_FDS);

function truncated(): FrameDecodeError {
  return new FrameDecodeError('A received message is truncated.');
}

function need(n: number): void {
  if (pos + n > src.length) throw truncated();
}

/**
 * Decodes a PLAIN frame (its kind and version already checked). `fds` holds the datagram's
 * `count` descriptors from index `first`; every one is taken by a tensor or closed here.
 */
export function decodePlain(bytes: Uint8Array, fds: ArrayLike<number>, count: number, first: number): unknown {
  if (bytes.buffer !== src.buffer) {
    srcView = new DataView(bytes.buffer);
    srcText = Buffer.from(bytes.buffer as ArrayBuffer) as unknown as Codecs;
  }
  src = bytes;
  pos = 2;
  fdsIn = fds;
  fdFirst = first;
  fdCount = count;
  if (count > fdTaken.length) fdTaken = new Uint8Array(count);
  if (count > 0) fdTaken.fill(0, 0, count);
  // Tensors made before a fault are left to the garbage collector, which gives their
  // storages back (NOTE [Lease buffers and the finalizer]), as the VALUE path does: a storage
  // this process already held when the message came is the user's, and must not be released.
  try {
    const value = read(0);
    if (pos !== bytes.length) throw new FrameDecodeError('A received message has bytes after its value.');
    return value;
  } finally {
    for (let i = 0; i < count; i++) if (fdTaken[i] === 0) addon.close(fds[first + i]!);
    fdsIn = NO_FDS;
  }
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
        // An own property named __proto__, as structured clone makes it, not a prototype change.
        if (k === '__proto__') Object.defineProperty(o, k, { value: v, writable: true, enumerable: true, configurable: true });
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
  need(23);
  const at0 = src.byteOffset + pos;
  const dtype = DTYPE_CODES[src[pos]!];
  const ndim = src[pos + 1]!;
  const strategyCode = src[pos + 2]!;
  const nameLength = src[pos + 3]!;
  const fdIndex = srcView.getUint16(at0 + 4, true);
  if (dtype === undefined) throw new FrameDecodeError(`A received tensor has dtype code ${src[pos]}.`);
  if (ndim > MAX_NDIM) throw new FrameDecodeError(`A received tensor claims ${ndim} dimensions.`);
  pos += 7;
  need(16 + 16 * ndim + nameLength);
  const nbytes = srcView.getFloat64(at0 + 7, true);
  const offset = srcView.getFloat64(at0 + 15, true);
  pos += 16;
  const shape = new Array<number>(ndim);
  const stride = new Array<number>(ndim);
  for (let i = 0; i < ndim; i++, pos += 8) shape[i] = srcView.getFloat64(src.byteOffset + pos, true);
  for (let i = 0; i < ndim; i++, pos += 8) stride[i] = srcView.getFloat64(src.byteOffset + pos, true);
  checkTensorLayout(shape, stride, offset);
  let name: string | null = null;
  if (nameLength > 0) {
    name = srcText.latin1Slice(src.byteOffset + pos, src.byteOffset + pos + nameLength);
    pos += nameLength;
  }
  const handle = checkHandle(STRATEGIES[strategyCode] ?? strategyCode, name, nbytes);
  let fd: number | null = null;
  if (handle.strategy === 'file_descriptor') {
    if (fdIndex >= fdCount || fdTaken[fdIndex] !== 0) {
      throw new FrameDecodeError(`A received tensor refers to descriptor ${fdIndex} but the message carries ${fdCount} (or uses one twice).`);
    }
    fdTaken[fdIndex] = 1;
    fd = fdsIn[fdFirst + fdIndex]!;
  }
  return new Tensor(importStorage(handle, fd), dtype, shape, stride, offset); // importStorage takes fd, whatever happens
}
