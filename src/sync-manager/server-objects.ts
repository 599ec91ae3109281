// The objects a SyncManager's server holds, and what each kind answers (Python's dict, list,
// Namespace, queue.Queue, threading.Lock and Value behind their proxies). Runs in the server
// process only. A call that must wait (a lock's acquire, a queue's get) returns a promise;
// its waiter is dropped when the connection that asked closes (its process died).
import { IndexOutOfRangeError, NotHeldError, QueueEmptyError, ManagerCallError } from '../errors.js';
import type { Kind } from './protocol.js';

/** One client process's connection, as the objects see it. */
export interface Peer {
  closed: boolean;
}

interface Waiter<T> {
  readonly peer: Peer;
  readonly resolve: (v: T) => void;
  timer: NodeJS.Timeout | null;
}

function waitFor<T>(list: Waiter<T>[], peer: Peer, timeout: unknown, onTimeout: () => T | Error): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const w: Waiter<T> = { peer, resolve, timer: null };
    if (typeof timeout === 'number' && timeout >= 0) {
      w.timer = setTimeout(() => {
        const at = list.indexOf(w);
        if (at >= 0) list.splice(at, 1);
        const r = onTimeout();
        if (r instanceof Error) reject(r);
        else resolve(r);
      }, timeout);
    }
    list.push(w);
  });
}

/** The next waiter whose process is still connected, or undefined. */
function nextWaiter<T>(list: Waiter<T>[]): Waiter<T> | undefined {
  for (;;) {
    const w = list.shift();
    if (w === undefined || !w.peer.closed) {
      if (w?.timer) clearTimeout(w.timer);
      return w;
    }
    if (w.timer) clearTimeout(w.timer);
  }
}

function index(i: unknown, length: number, insert = false): number {
  if (typeof i !== 'number' || !Number.isInteger(i)) throw new ManagerCallError(`A list index must be an integer, got ${String(i)}.`);
  const k = i < 0 ? i + length : i;
  if (insert) return Math.min(Math.max(k, 0), length);
  if (k < 0 || k >= length) throw new IndexOutOfRangeError(`list index ${i} is out of range for a list of ${length}.`);
  return k;
}

export type Method = (peer: Peer, args: unknown[]) => unknown;
export type Obj = Record<string, Method>;

function entries(v: unknown): Iterable<[unknown, unknown]> {
  if (v instanceof Map) return v;
  if (Array.isArray(v)) return v as [unknown, unknown][];
  if (v !== null && typeof v === 'object') return Object.entries(v);
  throw new ManagerCallError('update() takes a Map, an object or an array of [key, value] pairs.');
}

function dict(init: unknown): Obj {
  const m = new Map<unknown, unknown>(init === undefined ? [] : entries(init));
  return {
    get: (_, [k, d]) => (m.has(k) ? m.get(k) : d),
    set: (_, [k, v]) => void m.set(k, v),
    has: (_, [k]) => m.has(k),
    delete: (_, [k]) => m.delete(k),
    pop: (_, [k, d]) => {
      if (!m.has(k)) return d;
      const v = m.get(k);
      m.delete(k);
      return v;
    },
    setDefault: (_, [k, d]) => {
      if (!m.has(k)) m.set(k, d);
      return m.get(k);
    },
    update: (_, [v]) => {
      for (const [k, x] of entries(v)) m.set(k, x);
    },
    keys: () => [...m.keys()],
    values: () => [...m.values()],
    items: () => [...m.entries()],
    len: () => m.size,
    clear: () => m.clear(),
    copy: () => new Map(m),
  };
}

function list(init: unknown): Obj {
  const a: unknown[] = init === undefined ? [] : Array.isArray(init) ? [...init] : [...(init as Iterable<unknown>)];
  return {
    get: (_, [i]) => a[index(i, a.length)],
    set: (_, [i, v]) => {
      a[index(i, a.length)] = v;
    },
    append: (_, [v]) => void a.push(v),
    extend: (_, [vs]) => void a.push(...(vs as unknown[])),
    insert: (_, [i, v]) => void a.splice(index(i, a.length, true), 0, v),
    pop: (_, [i]) => {
      if (a.length === 0) throw new IndexOutOfRangeError('pop from an empty list.');
      return a.splice(index(i ?? -1, a.length), 1)[0];
    },
    index: (_, [v]) => a.indexOf(v),
    len: () => a.length,
    slice: (_, [s, e]) => a.slice(s as number | undefined, e as number | undefined),
    clear: () => void a.splice(0),
    copy: () => [...a],
  };
}

function namespace(init: unknown): Obj {
  const o = new Map<string, unknown>(init === undefined ? [] : (entries(init) as Iterable<[string, unknown]>));
  return {
    get: (_, [k]) => o.get(String(k)),
    set: (_, [k, v]) => void o.set(String(k), v),
    has: (_, [k]) => o.has(String(k)),
    delete: (_, [k]) => o.delete(String(k)),
    toObject: () => Object.fromEntries(o),
  };
}

function value(init: unknown): Obj {
  let v = init;
  return {
    get: () => v,
    set: (_, [x]) => {
      v = x;
    },
  };
}

function lock(): Obj {
  let holder: Peer | null = null;
  const waiters: Waiter<boolean>[] = [];
  const grant = (): void => {
    const w = nextWaiter(waiters);
    holder = w?.peer ?? null;
    w?.resolve(true);
  };
  const obj: Obj = {
    acquire: (peer, [opts]) => {
      const { blocking = true, timeout = null } = (opts ?? {}) as { blocking?: boolean; timeout?: number | null };
      if (holder === null) {
        holder = peer;
        return true;
      }
      if (!blocking) return false;
      return waitFor(waiters, peer, timeout, () => false);
    },
    release: () => {
      // threading.Lock: any thread may release it; releasing an unlocked lock is an error.
      if (holder === null) throw new NotHeldError('release() of a manager Lock that is not held.');
      grant();
    },
    locked: () => holder !== null,
    // A process that closed its connection (it died) gives back the lock it held.
    [DROPPED]: (peer) => {
      if (holder === peer) grant();
    },
  };
  return obj;
}

function queue(): Obj {
  const items: unknown[] = [];
  const waiters: Waiter<unknown>[] = [];
  return {
    put: (_, [v]) => {
      const w = nextWaiter(waiters);
      if (w !== undefined) w.resolve(v);
      else items.push(v);
    },
    get: (peer, [opts]) => {
      const { block = true, timeout = null } = (opts ?? {}) as { block?: boolean; timeout?: number | null };
      if (items.length > 0) return items.shift();
      if (!block) throw new QueueEmptyError('The manager Queue is empty.');
      return waitFor(waiters, peer, timeout, () => new QueueEmptyError(`The manager Queue stayed empty for ${timeout} ms.`));
    },
    qsize: () => items.length,
    empty: () => items.length === 0,
  };
}

/** Called on every object when a connection closes. */
export const DROPPED = '\u0000dropped';

export function makeObject(kind: Kind, init: unknown): Obj {
  switch (kind) {
    case 'dict':
      return dict(init);
    case 'list':
      return list(init);
    case 'namespace':
      return namespace(init);
    case 'value':
      return value(init);
    case 'lock':
      return lock();
    case 'queue':
      return queue();
  }
}
