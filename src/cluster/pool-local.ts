// The slots a cluster Pool's head holds on its own machine (NOTE [Same-host slots]): a local
// Pool of the head's, its errors marked with the host, its calls HostLostError once the host
// is lost.
//
// NOTE [Same-host slots]
// W5(a) (issue 29): a cluster Pool whose workers all sit on the head's host must cost what the
// local Pool costs. Through the agent, every chunk and result went head → nats-server → agent
// → worker and back (2.4x the local Pool on tiny tasks), so on its own machine the head does
// not use the wire at all:
//  - Which agent is on this machine: the one whose host id is the head's (cluster.hostId,
//    the default of both being TENSORPROC_HOST_ID, then the host name) and whose offer carries
//    this kernel's boot id (protocol.ts bootId(); the same in every namespace of one running
//    kernel, so an agent in a network namespace of its own, with a host id of its own, is
//    another host, as the netns tests want).
//  - The head asks that agent for its slots with `local: true`: the agent counts them as taken
//    and holds them for the head's lease, as for any job (a silent head frees them), and starts
//    nothing. The head then runs those slots' workers itself, as a local Pool (this file): the
//    same worker set, shared-memory channels and named objects as `new Pool()`, since it is
//    one. Tasks and results on this host move exactly as in a local Pool; NATS carries the
//    lease, the heartbeats and the close. (Starting the workers from the agent and driving
//    their channels from the head would need the worker set's descriptors and control block
//    handed between two unrelated processes, for the same result: the exit codes and signals
//    are seen first-hand here.)
//  - While every live slot is here, a call goes to that Pool whole (its chunking, its
//    batching, its lazy imap, its aborts): nothing is added but a check and a `.then`. With
//    slots on other hosts too, the head's chunk queue feeds them all, two chunks a slot, this
//    host's chunks each a call of one chunk to the local Pool.
//  - The contracts hold as on other hosts: a task's error and a ProcessExitedException carry
//    `host`; the workers see TENSORPROC_HOST_ID (set by an initializer of ours that then calls
//    the user's, exported by the cluster entry); the head's death ends them (they are its
//    children: NOTE [Worker set]); the agent's death is HostLostError for what they held, and
//    they are stopped, as an agent's own workers die with it.
import * as mp from '../index.js';
import type { EnvName } from '../env.js';
import type { RemoteImapOptions, RemotePoolOptions } from '../pool/cluster-link.js';
import type { WireTarget } from './protocol.js';
import { targetHere, wireTarget } from './pool-wire.js';

type ModuleTarget = { module: string; export: string };

const HOST_ENV = 'TENSORPROC_HOST_ID' satisfies EnvName;

/** The local Pool's initializer: this host's id for the tasks, then the user's initializer. */
export async function hostInit(host: string, init: ModuleTarget | null, ...args: unknown[]): Promise<void> {
  process.env[HOST_ENV] = host;
  if (init === null) return;
  const ns = (await import(init.module)) as Record<string, unknown>;
  const fn = ns[init.export];
  if (typeof fn !== 'function')
    throw new mp.TargetNotFunctionError(`The initializer ${init.module} has no function export '${init.export}'.`);
  await (fn as (...a: unknown[]) => unknown)(...args);
}

export class LocalSlots {
  readonly host: string;
  readonly slots: number;
  readonly #root: string;
  readonly #pool: mp.Pool;
  #lost: mp.HostLostError | null = null;

  constructor(host: string, slots: number, root: string, o: RemotePoolOptions) {
    this.host = host;
    this.slots = slots;
    this.#root = root;
    const init = o.initializer ? targetHere(root, wireTarget(root, o.initializer)) : null;
    this.#pool = new mp.Pool({
      processes: slots,
      // The cluster entry (dist/src/cluster/index.js, or the package's cluster bundle).
      initializer: { module: new URL('./index.js', import.meta.url), export: 'hostInit' },
      initargs: [host, init, ...o.initargs],
      maxtasksperchild: o.maxtasksperchild,
    });
  }

  get lost(): boolean {
    return this.#lost !== null;
  }

  #target(w: WireTarget): ModuleTarget {
    return targetHere(this.#root, w);
  }

  /** The error a call of this host rejects with: HostLostError once lost, else its own with `host`. */
  #mark = (e: unknown): never => {
    if (this.#lost !== null && e instanceof mp.PoolTerminatedError) throw this.#lost;
    if (e instanceof mp.ProcessExitedException) e.host = this.host;
    else if (e instanceof Error && !Object.hasOwn(e, 'host'))
      Object.defineProperty(e, 'host', { value: this.host, writable: true, configurable: true, enumerable: true });
    throw e;
  };

  /** One chunk, kept whole in one worker. */
  chunk(w: WireTarget, items: readonly unknown[], star: boolean, signal?: AbortSignal): Promise<unknown[]> {
    const o = { chunksize: items.length, signal };
    const t = this.#target(w);
    return (star ? this.#pool.starmap(t, items as unknown[][], o) : this.#pool.map(t, items, o)).catch(this.#mark);
  }

  /** A whole call, as the local Pool runs it. */
  map(w: WireTarget, items: readonly unknown[], chunksize: number | undefined, star: boolean, signal?: AbortSignal): Promise<unknown[]> {
    const o = { chunksize, signal };
    const t = this.#target(w);
    return (star ? this.#pool.starmap(t, items as unknown[][], o) : this.#pool.map(t, items, o)).catch(this.#mark);
  }

  apply(w: WireTarget, args: readonly unknown[], signal?: AbortSignal): Promise<unknown> {
    return this.#pool.apply(this.#target(w), args, { signal }).catch(this.#mark);
  }

  async *imap(
    w: WireTarget,
    iterable: AsyncIterable<unknown> | Iterable<unknown>,
    { chunksize, ahead, ordered, signal }: RemoteImapOptions,
  ): AsyncIterableIterator<unknown> {
    const t = this.#target(w);
    const o = { chunksize, buffersize: ahead, signal };
    try {
      yield* ordered ? this.#pool.imap(t, iterable, o) : this.#pool.imapUnordered(t, iterable, o);
    } catch (e) {
      this.#mark(e);
    }
  }

  /** The agent is lost: what runs here rejects with `e`, and the workers are stopped. */
  lose(e: mp.HostLostError): void {
    this.#lost ??= e;
    this.#pool.terminate();
  }

  /** Waits for the calls made, then the workers' exit; `terminate`: stops them now. */
  async end(terminate: boolean): Promise<void> {
    if (terminate) this.#pool.terminate();
    else this.#pool.close();
    await this.#pool.join().catch(() => {});
  }

  stats(): mp.PoolStats {
    return this.#pool.stats();
  }

  pids(): number[] {
    return this.#pool.pids();
  }
}
