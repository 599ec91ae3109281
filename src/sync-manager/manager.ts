// mp.Manager(): Python's SyncManager for Node.
//
// NOTE [Sync manager]
// A manager is a process of its own (a Process child of its owner, so it dies with the owner:
// NOTE [No orphans]) that holds dicts, lists, namespaces, queues, locks and values; every other
// process reaches them through proxies whose methods are calls to it (server-main.ts). Its
// address is a request Queue, its pid and a token. A process that first calls a manager makes a
// Pipe, puts the far end on the request Queue, and from then on sends calls and receives
// replies over its own pipe (client.ts), so calls from many processes never mix and a
// process's end of file tells the server that it is gone (its locks go back). A value in a
// call travels as any message does: tensors inside as handles, held by the server while the
// object holds them, shared rather than copied. A proxy whose manager died rejects with
// ManagerGoneError (pipe end of file or a pidfd of the server), never hangs. A named manager
// (`new mp.Manager({ name })`) serves itself under the name (NOTE [Named objects]):
// `mp.attach(name)` in any program of the same user rebuilds it from its reduction below.
import { InvalidArgumentError } from '../errors.js';
import { Process, type ProcessOptions } from '../process/index.js';
import { Queue } from '../queue/index.js';
import { registerReduction } from '../transport/index.js';
import { claimName, releaseName } from '../transport/names/index.js';
import { FrameDecodeError } from '../errors.js';
import { clientFor, type ManagerAddress } from './client.js';
import type { Connect, Kind } from './protocol.js';
import {
  type DictProxy,
  type ListProxy,
  type LockProxy,
  type NamespaceProxy,
  type QueueProxy,
  type ValueProxy,
  makeProxy,
  rebuildAddress,
  reduceAddress,
  type BaseProxy,
} from './proxies.js';

// The server's program (src/programs/), by path, as the Pool names its worker's.
const SERVER = {
  module: new URL(`../programs/sync-manager${import.meta.url.slice(import.meta.url.lastIndexOf('.'))}`, import.meta.url),
  export: 'main',
};

export interface ManagerOptions {
  /** Reachable by this name with mp.attach() (needs the named-object registry). */
  name?: string;
}

let made = 0;

/** A started manager (Python's SyncManager): make objects with dict(), list()…; shutdown() ends it. */
export class SyncManager {
  readonly #address: ManagerAddress;
  readonly #process: Process | null;

  /** @internal Use `await mp.Manager()`. */
  constructor(address: ManagerAddress, process: Process | null) {
    this.#address = address;
    this.#process = process;
  }

  /** The manager process's pid. */
  get pid(): number {
    return this.#address.pid;
  }

  /** @internal */
  get address(): ManagerAddress {
    return this.#address;
  }

  async #make(kind: Kind, init?: unknown): Promise<BaseProxy> {
    const id = (await clientFor(this.#address).call(0, 'create', [kind, init])) as number;
    return makeProxy(this.#address, id, kind);
  }

  dict<K = unknown, V = unknown>(init?: Map<K, V> | Iterable<[K, V]> | Record<string, V>): Promise<DictProxy<K, V>> {
    return this.#make('dict', init instanceof Map || Array.isArray(init) || init === undefined ? init : init) as Promise<DictProxy<K, V>>;
  }
  list<T = unknown>(init?: readonly T[]): Promise<ListProxy<T>> {
    return this.#make('list', init === undefined ? undefined : [...init]) as Promise<ListProxy<T>>;
  }
  namespace(init?: Record<string, unknown>): Promise<NamespaceProxy> {
    return this.#make('namespace', init) as Promise<NamespaceProxy>;
  }
  Queue<T = unknown>(): Promise<QueueProxy<T>> {
    return this.#make('queue') as Promise<QueueProxy<T>>;
  }
  Lock(): Promise<LockProxy> {
    return this.#make('lock') as Promise<LockProxy>;
  }
  /** Python's Value(typecode, value): the typecode is accepted and ignored (any value fits). */
  Value<T = unknown>(typecodeOrValue?: string | T, value?: T): Promise<ValueProxy<T>> {
    const v = value === undefined && typeof typecodeOrValue !== 'string' ? typecodeOrValue : value;
    return this.#make('value', v) as Promise<ValueProxy<T>>;
  }

  /** Ends the manager process (its objects go with it); proxies then reject with ERR_TP_MANAGER_GONE. */
  async shutdown(): Promise<void> {
    const client = clientFor(this.#address);
    if (!client.gone) {
      try {
        await client.call(0, 'shutdown', []);
      } catch {
        // gone already
      }
      client.markGone('it was shut down');
    }
    releaseName(this);
    if (this.#process !== null) {
      await this.#process.join();
      this.#address.requests.close();
    }
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.shutdown();
  }
}

async function start(opts: ManagerOptions | undefined): Promise<SyncManager> {
  if (opts !== undefined && (opts === null || typeof opts !== 'object')) throw new InvalidArgumentError('Manager() takes { name? }.');
  // The name is taken before the process starts: a name in use costs nothing (ERR_TP_NAME_TAKEN).
  const claim = claimName(opts, 'mp.Manager()');
  const requests = new Queue<Connect>();
  const options: ProcessOptions = { target: SERVER, args: [requests], daemon: true, name: 'tensorproc-manager' };
  const child = new Process(options);
  child.start();
  const address: ManagerAddress = { requests, pid: child.pid!, token: `${process.pid}:${++made}:${Date.now()}` };
  const m = new SyncManager(address, child);
  try {
    await clientFor(address).call(0, 'ping', []); // started and serving (or ERR_TP_MANAGER_GONE)
  } catch (e) {
    claim?.close();
    child.kill();
    await child.join();
    requests.close();
    throw e;
  }
  claim?.serve(m); // mp.attach(name) gets this manager (rebuilt by the reduction below)
  return m;
}

export interface ManagerFunction {
  (opts?: ManagerOptions): Promise<SyncManager>;
  new (opts?: ManagerOptions): Promise<SyncManager>;
}

/** `await mp.Manager()` (or `await new mp.Manager({ ... })`): starts a manager process. */
export const Manager = function Manager(opts?: ManagerOptions): Promise<SyncManager> {
  return start(opts);
} as unknown as ManagerFunction;

registerReduction<SyncManager>({
  name: 'sync-manager',
  type: SyncManager,
  reduce(m, ctx) {
    return reduceAddress(m.address, (o) => ctx.ref(o));
  },
  rebuild(state, ctx) {
    if (!Array.isArray(state) || state.length !== 3) throw new FrameDecodeError('A received manager is malformed.');
    return new SyncManager(
      rebuildAddress(state, (i) => ctx.get(i)),
      null,
    );
  },
});
