// PLAIN frames, the encoder: writes a small tree of plain values and tensors into one buffer
// (NOTE [Plain frames], plain-layout.ts), or gives the message to the VALUE path.
import { types } from 'node:util';
import { Tensor, type Storage } from '../tensor/index.js';
import { abandonExport, exportStorage, type ExportedStorage } from '../sharing/index.js';
import { DTYPE_CODE, FRAME_VERSION, INLINE_MAX, KIND_PLAIN, MAX_FDS, MAX_NDIM, STRATEGY_CODE, viewsOf } from './wire.js';
import {
  ENTRY,
  HEAD,
  MAX_DEPTH,
  MAX_ITEMS,
  MAX_NODES,
  NO_FD,
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
import type { Frame } from './wire.js';

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
  let witness: number | null = null;
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
      // A named segment's descriptor is the message's witness: sent once, referred to by no
      // entry (NOTE [Witnesses of named segments]).
      const fd = x.handle.strategy === 'file_system' ? null : x.fd;
      if (fd === null && x.fd !== null) witness = x.fd;
      outView.setUint16(at + 2, fd === null ? NO_FD : fds.length, true);
      outView.setFloat64(at + 4, x.handle.nbytes, true);
      outView.setUint32(at + 12, x.handle.offset, true); // 0, or a piece's in a 64 KiB slab
      if (fd !== null) fds.push(fd);
      at += ENTRY;
      if (name !== null) at += outText.latin1Write(name, at, name.length);
    }
  } catch (e) {
    undo();
    if (e === GIVE_UP) return null;
    throw e;
  }
  if (witness !== null) fds.push(witness);
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
  // A CUDA storage, or one that is not a segment's (a mapped file: NOTE [File storages]), travels by its own reduction.
  if (ndim > MAX_NDIM || t.storage.isReleased() || !t.storage.isPlainCpu()) return false;
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
