// Proxies of a SyncManager's objects (Python's DictProxy, ListProxy, NamespaceProxy…): every
// method is a call to the server, so every method is async. A proxy travels in spawn arguments
// and messages as its manager's address and the object's id (the reduction below); rebuilt in
// another process it calls the same object over that process's own connection (client.ts).
import { FrameDecodeError } from '../errors.js';
import type { Queue } from '../queue/index.js';
import { registerReduction } from '../transport/index.js';
import { clientFor, type ManagerAddress } from './client.js';
import { KINDS, type Connect, type Kind } from './protocol.js';

export interface GetOptions {
  /** Wait for an item (default true). */
  block?: boolean;
  /** At most this many ms (null: for ever); then ERR_TP_QUEUE_EMPTY. */
  timeout?: number | null;
}
export interface AcquireOptions {
  blocking?: boolean;
  timeout?: number | null;
}

/** A handle to one object held by a manager process. */
export class BaseProxy {
  readonly #address: ManagerAddress;
  /** The object's id in its manager. */
  readonly id: number;
  readonly kind: Kind;

  constructor(address: ManagerAddress, id: number, kind: Kind) {
    this.#address = address;
    this.id = id;
    this.kind = kind;
  }

  /** @internal */
  get address(): ManagerAddress {
    return this.#address;
  }

  protected call(method: string, ...args: unknown[]): Promise<unknown> {
    return clientFor(this.#address).call(this.id, method, args);
  }
}

/** A dict in the manager: keys and values of any structured-clone kind (tensors travel shared). */
export class DictProxy<K = unknown, V = unknown> extends BaseProxy {
  get(key: K): Promise<V | undefined>;
  get<D>(key: K, dflt: D): Promise<V | D>;
  get(key: K, dflt?: unknown): Promise<unknown> {
    return this.call('get', key, dflt);
  }
  async set(key: K, value: V): Promise<void> {
    await this.call('set', key, value);
  }
  has(key: K): Promise<boolean> {
    return this.call('has', key) as Promise<boolean>;
  }
  delete(key: K): Promise<boolean> {
    return this.call('delete', key) as Promise<boolean>;
  }
  pop(key: K, dflt?: V): Promise<V | undefined> {
    return this.call('pop', key, dflt) as Promise<V | undefined>;
  }
  setDefault(key: K, dflt: V): Promise<V> {
    return this.call('setDefault', key, dflt) as Promise<V>;
  }
  async update(entries: Map<K, V> | Iterable<[K, V]> | Record<string, V>): Promise<void> {
    await this.call('update', entries instanceof Map || Array.isArray(entries) ? entries : entries);
  }
  keys(): Promise<K[]> {
    return this.call('keys') as Promise<K[]>;
  }
  values(): Promise<V[]> {
    return this.call('values') as Promise<V[]>;
  }
  items(): Promise<[K, V][]> {
    return this.call('items') as Promise<[K, V][]>;
  }
  len(): Promise<number> {
    return this.call('len') as Promise<number>;
  }
  async clear(): Promise<void> {
    await this.call('clear');
  }
  /** A Map of every entry, copied here. */
  copy(): Promise<Map<K, V>> {
    return this.call('copy') as Promise<Map<K, V>>;
  }
}

/** A list in the manager; negative indices count from the end, as in Python. */
export class ListProxy<T = unknown> extends BaseProxy {
  get(i: number): Promise<T> {
    return this.call('get', i) as Promise<T>;
  }
  async set(i: number, value: T): Promise<void> {
    await this.call('set', i, value);
  }
  async append(value: T): Promise<void> {
    await this.call('append', value);
  }
  async extend(values: readonly T[]): Promise<void> {
    await this.call('extend', [...values]);
  }
  async insert(i: number, value: T): Promise<void> {
    await this.call('insert', i, value);
  }
  pop(i?: number): Promise<T> {
    return this.call('pop', i) as Promise<T>;
  }
  index(value: T): Promise<number> {
    return this.call('index', value) as Promise<number>;
  }
  len(): Promise<number> {
    return this.call('len') as Promise<number>;
  }
  slice(start?: number, end?: number): Promise<T[]> {
    return this.call('slice', start, end) as Promise<T[]>;
  }
  async clear(): Promise<void> {
    await this.call('clear');
  }
  /** Every element, copied here. */
  copy(): Promise<T[]> {
    return this.call('copy') as Promise<T[]>;
  }
}

/** Python's Namespace: named attributes, read and written one call each. */
export class NamespaceProxy extends BaseProxy {
  get(name: string): Promise<unknown> {
    return this.call('get', name);
  }
  async set(name: string, value: unknown): Promise<void> {
    await this.call('set', name, value);
  }
  has(name: string): Promise<boolean> {
    return this.call('has', name) as Promise<boolean>;
  }
  delete(name: string): Promise<boolean> {
    return this.call('delete', name) as Promise<boolean>;
  }
  toObject(): Promise<Record<string, unknown>> {
    return this.call('toObject') as Promise<Record<string, unknown>>;
  }
}

/** A queue.Queue in the manager (unbounded). */
export class QueueProxy<T = unknown> extends BaseProxy {
  async put(value: T): Promise<void> {
    await this.call('put', value);
  }
  get(opts?: GetOptions): Promise<T> {
    return this.call('get', opts) as Promise<T>;
  }
  qsize(): Promise<number> {
    return this.call('qsize') as Promise<number>;
  }
  empty(): Promise<boolean> {
    return this.call('empty') as Promise<boolean>;
  }
}

/** A threading.Lock in the manager: any process may release it; a dead holder's goes back. */
export class LockProxy extends BaseProxy {
  acquire(opts?: AcquireOptions): Promise<boolean> {
    return this.call('acquire', opts) as Promise<boolean>;
  }
  async release(): Promise<void> {
    await this.call('release');
  }
  locked(): Promise<boolean> {
    return this.call('locked') as Promise<boolean>;
  }
}

/** A value in the manager (Python's Value proxy: `get()` and `set()`). */
export class ValueProxy<T = unknown> extends BaseProxy {
  get(): Promise<T> {
    return this.call('get') as Promise<T>;
  }
  async set(value: T): Promise<void> {
    await this.call('set', value);
  }
}

const CLASSES: Record<Kind, new (a: ManagerAddress, id: number, kind: Kind) => BaseProxy> = {
  dict: DictProxy,
  list: ListProxy,
  namespace: NamespaceProxy,
  queue: QueueProxy,
  lock: LockProxy,
  value: ValueProxy,
};

export function makeProxy(address: ManagerAddress, id: number, kind: Kind): BaseProxy {
  return new CLASSES[kind](address, id, kind);
}

type ProxyState = [requests: number, pid: number, token: string, id: number, kind: Kind];

/** The reduce/rebuild of an address, for the proxies' and the manager's reductions. */
export function reduceAddress(a: ManagerAddress, ref: (o: object) => number): [number, number, string] {
  return [ref(a.requests), a.pid, a.token];
}

export function rebuildAddress(state: unknown[], get: (i: number) => object): ManagerAddress {
  const [requests, pid, token] = state;
  const q = typeof requests === 'number' ? get(requests) : null;
  if (q === null || !Number.isSafeInteger(pid) || typeof token !== 'string')
    throw new FrameDecodeError('A received manager address is malformed.');
  return { requests: q as Queue<Connect>, pid: pid as number, token };
}

registerReduction<BaseProxy>({
  name: 'manager-proxy',
  type: BaseProxy,
  reduce(p, ctx): ProxyState {
    return [...reduceAddress(p.address, (o) => ctx.ref(o)), p.id, p.kind];
  },
  rebuild(state, ctx) {
    if (!Array.isArray(state) || state.length !== 5) throw new FrameDecodeError('A received manager proxy is malformed.');
    const [, , , id, kind] = state as ProxyState;
    if (!Number.isSafeInteger(id) || !KINDS.includes(kind)) throw new FrameDecodeError('A received manager proxy is malformed.');
    return makeProxy(
      rebuildAddress(state, (i) => ctx.get(i)),
      id,
      kind,
    );
  },
});
