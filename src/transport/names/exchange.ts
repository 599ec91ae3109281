// The attach exchange (NOTE [Named objects] in claim.ts): the two datagrams an attaching
// process and a name's creator say to each other, defined once for both sides, and the
// object's reduction as JSON with its descriptors, for the reply.
//
// One connection per attach, on the name's SOCK_SEQPACKET socket; one JSON object (UTF-8)
// per datagram:
//   attacher -> creator  {"t":"attach","v":1,"name":"<name>"}
//   creator -> attacher  {"t":"object","v":1,"kind":"<reduction of the root>","table":[[reduction, state], ...]}
//                        with the descriptors the states refer to (SCM_RIGHTS, in index order)
//                     or {"t":"error","v":1,"code":"ERR_TP_...","message":"..."}
// then the creator closes the connection. The table is NOTE [Message table]'s, entry 0 the
// named object; a state refers to descriptors by their index in the datagram and to other
// entries by their index in the table (a sync object refers to its storage, entry 1, say).
import { addon } from '../../native/index.js';
import { FrameDecodeError } from '../../errors.js';
import { Reducer, Rebuilder } from '../message-table.js';
import { reductionNamed, type Reduction } from '../registry.js';
import { encode, parse } from '../../sharing/manager/protocol.js';

export const EXCHANGE_VERSION = 1;
/** Largest datagram either side sends or accepts. */
export const MAX_EXCHANGE = 64 * 1024;

export type Request = { t: 'attach'; v: number; name: string };
export type Reply =
  | { t: 'object'; v: number; kind: string; table: [string, unknown][] }
  | { t: 'error'; v: number; code: string; message: string };

// One JSON object per datagram, as the file_system manager's protocol: its encoder and parser.
export function encodeJson(msg: Request | Reply): Uint8Array {
  return encode(msg);
}

/** A request, or null if the datagram is not one (the creator then closes the connection). */
export function decodeRequest(bytes: Uint8Array): Request | null {
  const m = parse(bytes);
  if (m === null || m.t !== 'attach' || !Number.isSafeInteger(m.v) || typeof m.name !== 'string') return null;
  return { t: 'attach', v: m.v as number, name: m.name };
}

/** A reply, or null if the datagram is not one. */
export function decodeReply(bytes: Uint8Array): Reply | null {
  const m = parse(bytes);
  if (m === null || !Number.isSafeInteger(m.v)) return null;
  if (m.t === 'object' && typeof m.kind === 'string' && Array.isArray(m.table)) {
    const table = m.table as unknown[];
    if (!table.every((e) => Array.isArray(e) && e.length === 2 && typeof e[0] === 'string')) return null;
    return { t: 'object', v: m.v as number, kind: m.kind, table: table as [string, unknown][] };
  }
  if (m.t === 'error' && typeof m.code === 'string' && typeof m.message === 'string')
    return { t: 'error', v: m.v as number, code: m.code, message: m.message };
  return null;
}

/** An object reduced for a reply: the datagram, its descriptors (borrowed), and the undo if it is not sent. */
export interface ReducedObject {
  readonly bytes: Uint8Array;
  readonly fds: Int32Array;
  abandon(): void;
}

/** Reduces `obj` (a registered type) into an 'object' reply. */
export function reduceForReply(obj: object): ReducedObject {
  const r = new Reducer([obj], 1);
  try {
    r.reduceAll();
    const table = r.names.map((name, k) => [name, r.states[k]] as [string, unknown]);
    const bytes = encodeJson({ t: 'object', v: EXCHANGE_VERSION, kind: r.names[0]!, table });
    if (bytes.length > MAX_EXCHANGE) throw new FrameDecodeError(`The reduction of a named ${r.names[0]} is too large to send.`);
    return { bytes, fds: Int32Array.from(r.fdList), abandon: () => r.abandon() };
  } catch (e) {
    r.abandon();
    throw e;
  }
}

/**
 * Rebuilds the object of an 'object' reply. Takes every descriptor in `fds`: those the
 * object keeps are its own, the others are closed whatever happens.
 */
export function rebuildReply(reply: Extract<Reply, { t: 'object' }>, fds: number[]): object {
  const ctx = new Rebuilder(fds);
  try {
    const pending: { r: Reduction; state: unknown }[] = [];
    for (const [name, state] of reply.table) {
      const r = reductionNamed(name);
      if (r === undefined) throw new FrameDecodeError(`A named object's reply names an unknown kind '${name}'.`);
      pending.push({ r, state });
    }
    if (pending.length === 0) throw new FrameDecodeError("A named object's reply has an empty table.");
    ctx.rebuildAll(pending);
    return ctx.objects[0]!;
  } finally {
    ctx.closeUntaken();
  }
}

/** Closes descriptors received with a datagram that is not used. */
export function closeReceived(fds: Int32Array): void {
  for (let i = 1; i <= fds[0]!; i++) {
    try {
      addon.close(fds[i]!);
    } catch {
      // closed already
    }
  }
}
