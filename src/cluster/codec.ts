// What crosses hosts, and how (NOTE [Cluster wire]).
//
// NOTE [Cluster wire]
// Every message between a head and an agent is one value. Small control values (offers, open
// requests, queue items) go whole with encode()/decode(): V8's serializer after tensors are
// lowered to { dtype, shape, bytes }. A job's messages (tasks and results, which carry the
// tensors) go through Sender/Receiver, which keep tensor elements out of the serializer: the
// value is serialized with each tensor replaced by { dtype, shape, nbytes } (the "meta"), and
// the tensors' elements follow it as a raw byte stream, cut into parts under the server's
// max_payload. A part is [kind, sender id, message number, index, count] + bytes; part 0
// starts with the meta's length and the meta. The sender copies each tensor's bytes once, into
// its part (the NATS client then packs the part with its protocol line); the receiver, on part
// 0, creates every tensor of the message as a fresh shared tensor of its own host and copies
// each later part's bytes straight into them: one copy into shared memory there, no
// reassembly buffer, no deserializing of the elements. Passing a tensor on to a worker of that
// host is then zero-copy again. Two views of one storage arrive as two storages.
// NATS keeps the order of one publisher's messages on one subject, so parts arrive in order;
// they are keyed by the sender's random id and message number. A sender that dies
// mid-message, or a part lost with a server, leaves a partial entry, dropped with its job; a
// message whose part 0 was lost is dropped whole.
import { randomBytes } from 'node:crypto';
import { deserialize, serialize } from 'node:v8';
import type { Msg, NatsConnection } from '@nats-io/transport-node';
import * as mp from '../index.js';

const TENSOR = '__tensorproc_tensor__';

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

/** A tensor's place in a meta: its elements are the `i`-th run of the raw stream. */
const RAW = '__tensorproc_raw__';

/** The value with each tensor replaced by its description; the tensors' bytes in `out`, in order. */
function describe(v: unknown, out: Uint8Array[]): unknown {
  if (v instanceof mp.Tensor) {
    const c = v.isContiguous() ? v : v.contiguous();
    const d = c.data;
    out.push(new Uint8Array(d.buffer, d.byteOffset, d.byteLength));
    return { [RAW]: 1, dtype: c.dtype, shape: [...c.shape] };
  }
  if (Array.isArray(v)) return v.map((x) => describe(x, out));
  if (v instanceof Map) return new Map([...v].map(([k, x]) => [describe(k, out), describe(x, out)]));
  if (v !== null && typeof v === 'object' && !ArrayBuffer.isView(v) && isPlain(v)) {
    const o: Record<string, unknown> = {};
    for (const k of Object.keys(v)) o[k] = describe((v as Record<string, unknown>)[k], out);
    return o;
  }
  return v;
}

/** The inverse of describe(): each description becomes a fresh shared tensor, its bytes views in `out`. */
function build(v: unknown, out: Uint8Array[]): unknown {
  if (Array.isArray(v)) return v.map((x) => build(x, out));
  if (v instanceof Map) return new Map([...v].map(([k, x]) => [build(k, out), build(x, out)]));
  if (v !== null && typeof v === 'object' && !ArrayBuffer.isView(v) && isPlain(v)) {
    const o = v as Record<string, unknown>;
    if (o[RAW] === 1) {
      const t = mp.empty(o.shape as number[], { dtype: o.dtype as mp.DType, shared: true });
      const d = t.data;
      out.push(new Uint8Array(d.buffer, d.byteOffset, d.byteLength));
      return t;
    }
    for (const k of Object.keys(o)) o[k] = build(o[k], out);
  }
  return v;
}

// kind u8 (1: a part), sender id 8 bytes, message u32, index u32, count u32.
const HEAD = 21;
const PART = 1;
/** The most bytes one part carries: under Node's 64 KiB socket reads, a part is most often parsed
 * where it lies, not gathered into a growing buffer by the client (W5 (b), bench/cluster.ts). */
export const PART_BYTES = 62 * 1024;

/** Sends values on subjects, their tensors' bytes raw, in parts under the server's max_payload. */
export class Sender {
  readonly #nc: NatsConnection;
  readonly #id = randomBytes(8);
  readonly #partBytes: number;
  #n = 0;
  constructor(nc: NatsConnection, partBytes = PART_BYTES) {
    this.#nc = nc;
    this.#partBytes = partBytes;
  }

  send(subject: string, value: unknown): void {
    const raws: Uint8Array[] = [];
    const meta = serialize(describe(value, raws));
    // Room for the protocol line and headers the client adds, under the server's limit.
    const room = Math.max(4096, Math.min(this.#partBytes, this.#nc.info!.max_payload - 1024)) - HEAD;
    let total = 4 + meta.length;
    for (const r of raws) total += r.length;
    const count = Math.max(1, Math.ceil(total / room));
    const n = this.#n++ >>> 0;
    // The stream: u32 meta length, meta, then each tensor's bytes; parts cut it every `room` bytes.
    const len = Buffer.allocUnsafe(4);
    len.writeUInt32LE(meta.length, 0);
    const runs: Uint8Array[] = [len, meta, ...raws];
    let run = 0;
    let at = 0;
    for (let i = 0; i < count; i++) {
      const size = Math.min(room, total - i * room);
      const m = Buffer.allocUnsafe(HEAD + size);
      m[0] = PART;
      this.#id.copy(m, 1);
      m.writeUInt32LE(n, 9);
      m.writeUInt32LE(i, 13);
      m.writeUInt32LE(count, 17);
      let o = HEAD;
      while (o < m.length) {
        const r = runs[run]!;
        const k = Math.min(r.length - at, m.length - o);
        m.set(k === r.length ? r : r.subarray(at, at + k), o);
        o += k;
        at += k;
        if (at === r.length) {
          run++;
          at = 0;
        }
      }
      this.#nc.publish(subject, m);
    }
  }
}

interface Open {
  /** The meta's bytes while part 0's tail and later parts still complete it. */
  meta: Uint8Array | null;
  metaAt: number;
  value: unknown;
  dests: Uint8Array[];
  dest: number;
  at: number;
  next: number;
  count: number;
}

/** Puts parts back together: feed it every message of a subject; it returns each value once whole. */
export class Receiver {
  readonly #open = new Map<string, Open>();

  /** The message's value once its last part is in, else null. */
  take(msg: Msg): { value: unknown } | null {
    const d = msg.data;
    const b = Buffer.from(d.buffer, d.byteOffset, d.byteLength);
    if (b[0] !== PART || b.length < HEAD) return null;
    const key = `${b.toString('hex', 1, 9)}:${b.readUInt32LE(9)}`;
    const index = b.readUInt32LE(13);
    const count = b.readUInt32LE(17);
    let o: Open | undefined;
    let body = b.subarray(HEAD);
    if (index === 0) {
      const metaLen = body.readUInt32LE(0);
      o = { meta: new Uint8Array(metaLen), metaAt: 0, value: undefined, dests: [], dest: 0, at: 0, next: 0, count };
      body = body.subarray(4);
    } else {
      o = this.#open.get(key);
      // Its first part was lost (a server went down), or one between: the value is dropped.
      if (!o || o.next !== index) {
        this.#open.delete(key);
        return null;
      }
    }
    o.next = index + 1;
    if (o.meta) {
      const k = Math.min(body.length, o.meta.length - o.metaAt);
      o.meta.set(body.subarray(0, k), o.metaAt);
      o.metaAt += k;
      body = body.subarray(k);
      if (o.metaAt === o.meta.length) {
        o.value = build(deserialize(o.meta), o.dests);
        o.meta = null;
      }
    }
    while (body.length > 0 && o.dest < o.dests.length) {
      const t = o.dests[o.dest]!;
      const k = Math.min(body.length, t.length - o.at);
      t.set(body.subarray(0, k), o.at);
      o.at += k;
      body = body.subarray(k);
      if (o.at === t.length) {
        o.dest++;
        o.at = 0;
      }
    }
    if (o.next < o.count) {
      this.#open.set(key, o);
      return null;
    }
    this.#open.delete(key);
    return o.meta ? null : { value: o.value };
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
