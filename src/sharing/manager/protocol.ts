// What a process and the file_system manager say to each other, defined once for both
// sides (client.ts, server.ts). One JSON object per SOCK_SEQPACKET datagram: the kernel
// keeps the boundaries, so there is no framing. See NOTE [The file_system manager].

export const PROTOCOL_VERSION = 1;

/** A process to the manager. */
export type ClientMessage =
  /** First message of a connection. */
  | { t: 'hello'; v: number }
  /** This process now maps these segments (created or opened them). */
  | { t: 'hold'; names: string[] }
  /** This process no longer maps these segments. */
  | { t: 'drop'; names: string[] }
  /** Answer with 'synced' once everything sent before has been handled (tests, diagnostics). */
  | { t: 'sync'; id: number }
  /** This connection is closing on purpose: the process let go of everything first. */
  | { t: 'bye' };

/** The manager to a process. */
export type ManagerMessage = { t: 'welcome'; v: number; pid: number } | { t: 'synced'; id: number };

/** The only names the manager will ever touch (see newName() in segment.ts). */
export const NAME_PATTERN = /^\/tensorproc_(\d+)_[0-9a-f]{16}$/;

/** Names per 'hold'/'drop' datagram: ~40 bytes each, far below a datagram's limit. */
export const NAMES_PER_MESSAGE = 1000;

/** Largest datagram either side sends or accepts. */
export const MAX_DATAGRAM = 64 * 1024;

const encoder = new TextEncoder();
const decoder = new TextDecoder('utf-8', { fatal: true });

/** One datagram's JSON; also the attach exchange's (src/transport/names/exchange.ts). */
export function encode(msg: ClientMessage | ManagerMessage | object): Uint8Array {
  return encoder.encode(JSON.stringify(msg));
}

/** A datagram's JSON object, or null if it is not one. */
export function parse(bytes: Uint8Array): Record<string, unknown> | null {
  try {
    const v: unknown = JSON.parse(decoder.decode(bytes));
    return typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}

const isCount = (x: unknown): x is number => Number.isSafeInteger(x) && (x as number) >= 0;

/** A client's datagram, or null if it is not one (the manager then drops the connection). */
export function decodeClient(bytes: Uint8Array): ClientMessage | null {
  const m = parse(bytes);
  if (m === null) return null;
  switch (m.t) {
    case 'hello':
      return isCount(m.v) ? { t: 'hello', v: m.v } : null;
    case 'hold':
    case 'drop': {
      const names = m.names;
      if (!Array.isArray(names) || names.length > NAMES_PER_MESSAGE) return null;
      if (!names.every((n) => typeof n === 'string' && NAME_PATTERN.test(n))) return null;
      return { t: m.t, names: names as string[] };
    }
    case 'sync':
      return isCount(m.id) ? { t: 'sync', id: m.id } : null;
    case 'bye':
      return { t: 'bye' };
    default:
      return null;
  }
}

/** A manager's datagram, or null if it is not one. */
export function decodeManager(bytes: Uint8Array): ManagerMessage | null {
  const m = parse(bytes);
  if (m === null) return null;
  if (m.t === 'welcome' && isCount(m.v) && isCount(m.pid)) return { t: 'welcome', v: m.v, pid: m.pid };
  if (m.t === 'synced' && isCount(m.id)) return { t: 'synced', id: m.id };
  return null;
}

/** The pid in a segment's name: the process that created it. */
export function creatorOf(name: string): number {
  const m = NAME_PATTERN.exec(name);
  return m ? Number(m[1]) : 0;
}
