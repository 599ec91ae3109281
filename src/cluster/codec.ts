// What crosses hosts, and how (NOTE [Cluster wire]).
//
// NOTE [Cluster wire]
// Every message between a head and an agent is one value, serialized with V8's serializer
// after its tensors are lowered to { dtype, shape, bytes } (a copy of their elements): a
// tensor's shared memory means nothing on another host. The receiver raises each one into a
// fresh shared tensor of its own host (one copy, into shared memory there), so passing it on
// to a worker of that host is zero-copy again. Two views of one storage arrive as two storages.
// A value larger than the server's max_payload travels in parts, each under it: NATS keeps
// the order of one publisher's messages on one subject, so the receiver appends parts as they
// come, keyed by the sender's random id and a message number; a sender that dies mid-message
// leaves a partial entry, dropped with its job.
import { randomBytes } from 'node:crypto';
import { deserialize, serialize } from 'node:v8';
import type { Msg, NatsConnection } from '@nats-io/transport-node';
import * as mp from '../index.js';

const TENSOR = '__tensorproc_tensor__';
const WHOLE = 0;
const PART = 1;
const HEAD = 17; // kind u8, sender 8 bytes, message u32, index u16 (x2: index and count)

function lower(v: unknown): unknown {
  if (v instanceof mp.Tensor) {
    const c = v.isContiguous() ? v : v.contiguous();
    const d = c.data;
    return { [TENSOR]: 1, dtype: c.dtype, shape: [...c.shape], bytes: new Uint8Array(d.buffer, d.byteOffset, d.byteLength).slice() };
  }
  if (Array.isArray(v)) return v.map(lower);
  if (v instanceof Map) return new Map([...v].map(([k, x]) => [lower(k), lower(x)]));
  if (v !== null && typeof v === 'object' && !ArrayBuffer.isView(v) && isPlain(v)) {
    const o: Record<string, unknown> = {};
    for (const k of Object.keys(v)) o[k] = lower((v as Record<string, unknown>)[k]);
    return o;
  }
  return v;
}

function raise(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(raise);
  if (v instanceof Map) return new Map([...v].map(([k, x]) => [raise(k), raise(x)]));
  if (v !== null && typeof v === 'object' && !ArrayBuffer.isView(v) && isPlain(v)) {
    const o = v as Record<string, unknown>;
    if (o[TENSOR] === 1) {
      const t = mp.empty(o.shape as number[], { dtype: o.dtype as mp.DType, shared: true });
      const d = t.data;
      new Uint8Array(d.buffer, d.byteOffset, d.byteLength).set(o.bytes as Uint8Array);
      return t;
    }
    for (const k of Object.keys(o)) o[k] = raise(o[k]);
  }
  return v;
}

function isPlain(v: object): boolean {
  const p = Object.getPrototypeOf(v);
  return p === Object.prototype || p === null;
}

export function encode(value: unknown): Uint8Array {
  return serialize(lower(value));
}

export function decode(bytes: Uint8Array): unknown {
  return raise(deserialize(bytes));
}

/** Sends values on subjects, in parts when one is larger than the server's max_payload. */
export class Sender {
  readonly #nc: NatsConnection;
  readonly #id = randomBytes(8);
  #n = 0;
  constructor(nc: NatsConnection) {
    this.#nc = nc;
  }

  send(subject: string, value: unknown): void {
    const body = encode(value);
    const room = Math.max(4096, this.#nc.info!.max_payload - 1024);
    if (body.length + 1 <= room) {
      const m = new Uint8Array(body.length + 1);
      m[0] = WHOLE;
      m.set(body, 1);
      this.#nc.publish(subject, m);
      return;
    }
    const n = this.#n++ >>> 0;
    const count = Math.ceil(body.length / (room - HEAD));
    for (let i = 0; i < count; i++) {
      const part = body.subarray(i * (room - HEAD), (i + 1) * (room - HEAD));
      const m = Buffer.allocUnsafe(HEAD + part.length);
      m[0] = PART;
      this.#id.copy(m, 1);
      m.writeUInt32LE(n, 9);
      m.writeUInt16LE(i, 13);
      m.writeUInt16LE(count, 15);
      m.set(part, HEAD);
      this.#nc.publish(subject, m);
    }
  }
}

/** Puts parts back together: feed it every message of a subject; it returns each value once whole. */
export class Receiver {
  readonly #open = new Map<string, Uint8Array[]>();

  /** The message's value, or undefined while parts are missing (a value may not be undefined). */
  take(msg: Msg): { value: unknown } | null {
    const d = msg.data;
    if (d[0] === WHOLE) return { value: decode(d.subarray(1)) };
    const b = Buffer.from(d.buffer, d.byteOffset, d.byteLength);
    const key = `${b.toString('hex', 1, 9)}:${b.readUInt32LE(9)}`;
    const index = b.readUInt16LE(13);
    const count = b.readUInt16LE(15);
    const parts = index === 0 ? [] : this.#open.get(key);
    if (!parts) return null; // its first part was lost (a server went down): the value is dropped
    parts.push(d.subarray(HEAD));
    if (parts.length < count) {
      this.#open.set(key, parts);
      return null;
    }
    this.#open.delete(key);
    return { value: decode(Buffer.concat(parts)) };
  }
}

const BUILTIN = new Set(['Error', 'TypeError', 'RangeError', 'SyntaxError', 'ReferenceError', 'EvalError', 'URIError']);

/** An error as data, to be rebuilt on the head as its class (tensorproc's own, by name). */
export function errorToData(e: unknown): Record<string, unknown> {
  if (!(e instanceof Error)) return { name: 'Error', message: String(e) };
  const o: Record<string, unknown> = { name: e.name, message: e.message, stack: e.stack };
  for (const k of Object.keys(e)) {
    const v = (e as unknown as Record<string, unknown>)[k];
    if (v === null || ['string', 'number', 'boolean'].includes(typeof v)) o[k] = v;
  }
  return o;
}

export function errorFromData(d: Record<string, unknown>, host: string): Error {
  // tensorproc's classes by name, then the built-in ones (RangeError, TypeError...).
  const name = String(d.name);
  const C = Object.hasOwn(mp, name)
    ? (mp as unknown as Record<string, unknown>)[name]
    : BUILTIN.has(name)
      ? (globalThis as Record<string, unknown>)[name]
      : undefined;
  const proto = typeof C === 'function' && C.prototype instanceof Error ? (C.prototype as Error) : Error.prototype;
  const e = Object.create(proto) as Error & Record<string, unknown>;
  for (const [k, v] of Object.entries(d)) {
    Object.defineProperty(e, k, {
      value: v,
      writable: true,
      configurable: true,
      enumerable: k !== 'stack' && k !== 'message' && k !== 'name',
    });
  }
  if (proto !== Error.prototype && proto.name !== d.name) e.name = String(d.name);
  // Which host it came from, as ProcessExitedException.host says it for a worker's death.
  Object.defineProperty(e, 'host', { value: host, writable: true, configurable: true, enumerable: true });
  return e;
}
