// The head of a cluster Pool (NOTE [Cluster pool]): its calls, to this host's own slots whole
// when they are all there are (NOTE [Same-host slots]), else as chunks to hosts with room;
// its lifecycle (close, terminate, join) and liveness. Where the slots are is
// pool-placement.ts's; the chunks and their results pool-calls.ts's; NATS pool-wire.ts's.
import { randomBytes } from 'node:crypto';
import { resolve } from 'node:path';
import type { NatsConnection } from '@nats-io/transport-node';
import * as mp from '../index.js';
import type { RemoteImapOptions, RemotePool, RemotePoolOptions } from '../pool/cluster-link.js';
import { connectCluster, hostId } from './connect.js';
import { errorFromData } from './codec.js';
import { DEFAULT_HOST_TIMEOUT_MS, HEARTBEAT_MS, headBeat, type ToHead } from './protocol.js';
import { Calls, type CallState, type Chunk } from './pool-calls.js';
import { streamChunks } from './pool-stream.js';
import { Placement, type Host } from './pool-placement.js';
import type { LocalSlots } from './pool-local.js';
import { HeadWire, wireTarget } from './pool-wire.js';

export class ClusterPool implements RemotePool {
  readonly #o: RemotePoolOptions;
  readonly #job = randomBytes(6).toString('hex');
  readonly #root: string;
  readonly #hostTimeout: number;
  readonly #ready: Promise<void>;
  readonly #calls = new Calls((call) => this.#cancelHeld(call));
  #nc: NatsConnection | null = null;
  #wire: HeadWire | null = null;
  #placement: Placement | null = null;
  #timer: NodeJS.Timeout | null = null;
  #ended: Promise<void> | null = null;
  #closing = false;
  #onIdle: (() => void) | null = null;
  readonly #closedWaiters = new Map<string, () => void>();

  constructor(o: RemotePoolOptions) {
    this.#o = o;
    this.#root = resolve(o.cluster.root ?? process.cwd());
    this.#hostTimeout = o.cluster.hostTimeout ?? DEFAULT_HOST_TIMEOUT_MS;
    this.#ready = this.#start();
    this.#ready.catch(() => {});
  }

  async #start(): Promise<void> {
    const c = this.#o.cluster;
    const me = hostId(c.hostId);
    const nc = await connectCluster({ ...c, name: `tensorproc head ${me}` });
    this.#nc = nc;
    this.#wire = new HeadWire(nc, this.#job, (m) => this.#onMessage(m));
    this.#timer = setInterval(() => this.#tick(), HEARTBEAT_MS);
    nc.publish(headBeat(this.#job));
    this.#placement = new Placement(nc, this.#job, this.#o, this.#root, this.#hostTimeout);
    try {
      await this.#placement.place(me, c.connectTimeout ?? 10_000);
    } catch (e) {
      await this.#shutdown(true);
      throw e;
    }
  }

  async map(
    target: mp.Target,
    items: readonly unknown[],
    chunksize: number | undefined,
    star: boolean,
    signal?: AbortSignal,
  ): Promise<unknown[]> {
    await this.#ready;
    const wire = wireTarget(this.#root, target);
    const here = this.#placement!.onlyLocal();
    if (here !== null) return here.map(wire, items, chunksize, star, signal);
    const size = chunksize ?? Math.max(1, Math.ceil(items.length / (4 * this.#o.processes)));
    const all = this.#calls.add(wire, items, size, star, signal);
    this.#pump();
    return (await all).flat(1);
  }

  async apply(target: mp.Target, args: readonly unknown[], signal?: AbortSignal): Promise<unknown> {
    await this.#ready;
    const wire = wireTarget(this.#root, target);
    const here = this.#placement!.onlyLocal();
    if (here !== null) return here.apply(wire, args, signal);
    const all = this.#calls.add(wire, [args], 1, true, signal);
    this.#pump();
    return (await all)[0]![0];
  }

  async *imap(
    target: mp.Target,
    iterable: AsyncIterable<unknown> | Iterable<unknown>,
    o: RemoteImapOptions,
  ): AsyncIterableIterator<unknown> {
    await this.#ready;
    const wire = wireTarget(this.#root, target);
    const here = this.#placement!.onlyLocal();
    if (here !== null) {
      yield* here.imap(wire, iterable, o);
      return;
    }
    // Leaving the loop early ends the stream's signal too; only the caller's own signal is an
    // abort on the agents (a local Pool stops a worker that has begun an aborted call's chunk).
    yield* streamChunks(iterable, o, (items, signal) => {
      const values = this.#calls.add(wire, items, items.length, false, signal, o.signal !== undefined);
      this.#pump();
      return values.then((chunks) => chunks[0]!);
    });
  }

  /** Gives queued chunks to hosts with room: at most two chunks a slot, this host's first. */
  #pump(): void {
    if (this.#onIdle !== null && this.#isIdle()) {
      this.#onIdle();
      this.#onIdle = null;
    }
    const queue = this.#calls.queue;
    if (queue.length === 0) return;
    const hosts = this.#placement?.hosts ?? [];
    for (const h of hosts) {
      if (h.lost || h.closed) continue;
      while (queue.length > 0 && h.held.size < 2 * h.slots) {
        const c = queue.shift()!;
        if (c.call.settled) continue;
        h.held.set(c.seq, c);
        if (h.local !== null) this.#runHere(h, c);
        else
          this.#wire!.send(h.name, { op: 'run', seq: c.seq, target: c.target, items: c.items, star: c.star, abortable: c.call.abortable });
      }
    }
    if (queue.length > 0 && !hosts.some((h) => !h.lost && !h.closed)) {
      const e = new mp.HostLostError('Every host of this cluster Pool is lost: nothing is left to run its tasks.', hosts[0]?.name ?? '');
      for (const c of queue.splice(0)) this.#calls.fail(c.call, e);
    }
  }

  /**
   * An aborted call's chunks held by other hosts: each agent drops those no worker has begun, as
   * a local Pool does (one begun runs to its end there, its result dropped). This host's own
   * chunks are aborted by the call's signal, which their local Pool calls carry.
   */
  #cancelHeld(call: CallState): void {
    if (!call.abortable) return;
    for (const h of this.#placement?.hosts ?? []) {
      if (h.local !== null || h.lost || h.closed || !h.cancels) continue;
      for (const [seq, c] of h.held) if (c.call === call) this.#wire!.send(h.name, { op: 'cancel', seq });
    }
  }

  /** A chunk for this host's own workers: one call of the local Pool, no wire (NOTE [Same-host slots]). */
  #runHere(h: Host, c: Chunk): void {
    h.local!.chunk(c.target, c.items, c.star, c.call.signal).then(
      (values) => this.#settle(h, c.seq, values, null),
      (e: unknown) => this.#settle(h, c.seq, null, e as Error),
    );
  }

  #settle(h: Host, seq: number, values: unknown[] | null, error: Error | null): void {
    const c = h.held.get(seq);
    if (!c) return; // its host was declared lost meanwhile: already rejected
    h.held.delete(seq);
    if (error === null) this.#calls.settle(c, values!);
    else this.#calls.fail(c.call, error);
    // This host's tasks are its local Pool's to count (pool.stats()).
    if (h.local === null) this.#calls[error === null ? 'done' : 'failed'] += c.items.length;
    this.#pump();
  }

  #onMessage(m: ToHead): void {
    const host = this.#placement?.hosts.find((h) => h.name === m.host);
    if (!host) return;
    if (m.op === 'closed') {
      host.closed = true;
      this.#closedWaiters.get(host.name)?.();
    } else if (m.op === 'done') this.#settle(host, m.seq, m.values, null);
    else if (m.op === 'failed') this.#settle(host, m.seq, null, errorFromData(m.error, m.host));
  }

  #tick(): void {
    const nc = this.#nc;
    if (!nc || nc.isClosed()) return;
    nc.publish(headBeat(this.#job));
    for (const h of this.#placement?.expire(performance.now()) ?? []) {
      const e = new mp.HostLostError(
        `Host ${h.name} of this cluster Pool was silent for ${this.#hostTimeout} ms (its agent died or is cut off): the tasks it held are lost.`,
        h.name,
      );
      for (const c of h.held.values()) this.#calls.fail(c.call, e);
      h.held.clear();
      h.local?.lose(e);
      this.#closedWaiters.get(h.name)?.();
    }
    this.#pump();
  }

  async #shutdown(terminate: boolean): Promise<void> {
    const nc = this.#nc;
    if (!nc) return;
    const hosts = this.#placement?.hosts ?? [];
    // This host's workers first (close: once the calls made have finished), then the leases.
    await Promise.all(hosts.map((h) => h.local?.end(terminate || h.lost)));
    const live = hosts.filter((h) => !h.lost && !h.closed);
    const gone = live.map((h) => new Promise<void>((r) => this.#closedWaiters.set(h.name, r)));
    for (const h of live) this.#wire!.send(h.name, { op: terminate ? 'terminate' : 'close' });
    await Promise.all(gone); // a host lost meanwhile resolves its waiter too (#tick)
    if (this.#timer) clearInterval(this.#timer);
    this.#placement?.unsubscribe();
    await Promise.race([nc.flush().catch(() => {}), new Promise((r) => setTimeout(r, 1000).unref())]);
    await nc.close().catch(() => {});
  }

  close(): void {
    if (this.#closing) return;
    this.#closing = true;
    this.#ended = this.#ready.then(
      async () => {
        await this.#idle();
        await this.#shutdown(false);
      },
      () => {},
    );
  }

  terminate(): void {
    if (this.#ended && !this.#closing) return;
    this.#closing = true;
    const e = new mp.PoolTerminatedError('The pool was terminated before this call finished: its tasks were stopped.');
    for (const c of this.#calls.queue.splice(0)) this.#calls.fail(c.call, e);
    for (const h of this.#placement?.hosts ?? []) for (const c of h.held.values()) this.#calls.fail(c.call, e);
    this.#ended = this.#ready.then(
      () => this.#shutdown(true),
      () => {},
    );
  }

  /** Resolves once nothing is queued or held (checked by #pump, after every result and every loss). */
  #idle(): Promise<void> {
    if (this.#isIdle()) return Promise.resolve();
    return new Promise((r) => {
      this.#onIdle = r;
    });
  }

  #isIdle(): boolean {
    return this.#calls.queue.length === 0 && !(this.#placement?.hosts ?? []).some((h) => h.held.size > 0 && !h.lost);
  }

  join(): Promise<void> {
    return this.#ended ?? Promise.reject(new mp.PoolRunningError('join(): the pool is still running. Call close() or terminate() first.'));
  }

  /** This host's slots, lost or not. */
  #here(): LocalSlots | null {
    for (const h of this.#placement?.hosts ?? []) if (h.local !== null) return h.local;
    return null;
  }

  /** The pids of this host's workers (the other hosts' are their agents' to know). */
  pids(): number[] {
    return this.#here()?.pids() ?? [];
  }

  /** This host's local Pool's stats, with the head's counts of the other hosts' tasks added. */
  stats(): mp.PoolStats {
    const hosts = this.#placement?.hosts ?? [];
    const none = { p50: 0, p90: 0, p99: 0, count: 0 };
    const base = this.#here()?.stats() ?? {
      ...{ done: 0, failed: 0, queued: 0, inFlight: 0, restarts: 0 },
      ...{ runTime: none, waitTime: none, workers: [] },
    };
    let inFlight = 0;
    for (const h of hosts) if (h.local === null) for (const c of h.held.values()) inFlight += c.items.length;
    return {
      ...base,
      done: base.done + this.#calls.done,
      failed: base.failed + this.#calls.failed,
      queued: base.queued + this.#calls.queued(),
      inFlight: base.inFlight + inFlight,
    };
  }
}

export function createRemotePool(o: RemotePoolOptions): RemotePool {
  return new ClusterPool(o);
}
