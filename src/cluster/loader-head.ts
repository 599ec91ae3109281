// The head of a cluster DataLoader's workers (NOTE [Cluster loader]): one epoch's workers (or
// a persistent loader's) placed on the agents' slots, this host's first, and driven as the
// loader drives a local worker set: by worker id, messages in, messages and exits out.
//
// NOTE [Cluster loader]
// `new DataLoader(target, { numWorkers, cluster })` (issue 29) keeps every contract of the local
// loader by changing only where the workers are: LoaderWorkers (data/workers.ts: the sampler,
// the round robin, prefetch, the reorder buffer, restarts, persistent workers, state dicts)
// drives a LoaderSet by worker id, and with `cluster` that set is this file's instead of one
// LoaderWorkerHost (data/worker-host.ts) on this host:
//  - Placement: the cluster Pool's (pool-placement.ts, `loader: true`): numWorkers slots from
//    the agents' offers, the head's own host's first (NOTE [Same-host slots]), then the other
//    hosts' by name. Worker ids follow that order, so worker 0 is on the head's host.
//  - Workers: on the head's own host the head runs them itself, a LoaderWorkerHost whose
//    batches stay shared memory; on another host its agent runs one per loader job
//    (loader-agent.ts), started with the head's spec (its targets as paths under the root,
//    loader-wire.ts) and each worker's loader id, so that worker k has seed baseSeed + k and
//    getWorkerInfo().id k wherever it runs, and loads exactly the batches a local loader's
//    worker k would, in the same order: the same seed gives the same epoch as a local loader.
//    Both hosts run the same worker program, the local loader's.
//  - Wire: head → agent `lstart`/`lreplace`/`lsend` (a worker's inbox), agent → head `lmsg`
//    (what the worker sent, with its pid) and `lexit` (its exit code, signal and error), in
//    order on one subject, so a worker's messages come before its exit as in a worker set.
//    Batches go through codec.ts: copied once into fresh shared tensors of the head's host;
//    the agent releases its copy at once (back to the worker's segment cache).
//  - Failures: a worker's death is the local loader's (DataLoaderWorkerExitedError, or with
//    maxWorkerRestarts an `lreplace` and its batches sent again). A host whose heartbeat stops
//    for hostTimeout fails the iteration with HostLostError through the set's fail hook: the
//    batches ready before it are handed out, then the error; the workers left are stopped, and
//    loader.stateDict() resumes the epoch (the next iteration places its workers anew). Not
//    re-run on other hosts: numWorkers slots would have to be found again mid-epoch, and a
//    worker's seed and replica state live with it. The head's death ends every remote worker
//    through the job lease, as for pools; an agent's death takes its workers with it.
//  - Refusals before any worker starts: a composed dataset (handles to this host's memory)
//    in the constructor, a target outside cluster.root before connecting, too few slots after
//    connectTimeout (ClusterUnavailableError).
// The head holds one NATS connection per set of workers: an epoch's, or a persistent loader's
// until close(). The core loads this entry only when `cluster` is given (workers/cluster-entry.ts).
import { randomBytes } from 'node:crypto';
import { resolve } from 'node:path';
import type { NatsConnection } from '@nats-io/transport-node';
import * as mp from '../index.js';
import type { RemoteLoader, RemoteLoaderOptions } from '../data/cluster-link.js';
import type { WorkerArgs } from '../data/messages.js';
import type { LoaderSet, LoaderSetOptions } from '../data/worker-host.js';
import type { StopOptions } from '../workers/worker-set.js';
import { connectCluster, hostId } from './connect.js';
import { errorFromData } from './codec.js';
import { wireSpec } from './loader-wire.js';
import { DEFAULT_HOST_TIMEOUT_MS, HEARTBEAT_MS, headBeat, type ToHead } from './protocol.js';
import { Placement, type Host } from './pool-placement.js';
import { HeadWire } from './pool-wire.js';

/** Where worker `id` runs: its host, and its index in that host's set. */
interface Seat {
  host: Host;
  index: number;
  /** A remote worker: started and not reported ended (a local one asks its set). */
  alive: boolean;
  /** Its pid on its host, as last reported. */
  pid: number | null;
}

class ClusterLoader implements RemoteLoader, LoaderSet {
  readonly #o: RemoteLoaderOptions;
  readonly #job = randomBytes(6).toString('hex');
  readonly #root: string;
  readonly #hostTimeout: number;
  readonly #seats: Seat[] = [];
  readonly #closedWaiters = new Map<string, () => void>();
  #nc: NatsConnection | null = null;
  #wire: HeadWire | null = null;
  #placement: Placement | null = null;
  #timer: NodeJS.Timeout | null = null;
  /** This host's workers, run by the head itself (NOTE [Same-host slots]). */
  #local: mp.LoaderWorkerHost | null = null;
  #localBase = 0;
  #so: LoaderSetOptions | null = null;
  #fail: (e: Error) => void = () => {};
  #stopped: Promise<void> | null = null;

  constructor(o: RemoteLoaderOptions) {
    this.#o = o;
    this.#root = resolve(o.cluster.root ?? process.cwd());
    this.#hostTimeout = o.cluster.hostTimeout ?? DEFAULT_HOST_TIMEOUT_MS;
  }

  async place(): Promise<void> {
    wireSpec(this.#root, this.#o.spec); // refused here, before anything connects
    const c = this.#o.cluster;
    const me = hostId(c.hostId);
    const nc = await connectCluster({ ...c, name: `tensorproc loader ${me}` });
    this.#nc = nc;
    this.#wire = new HeadWire(nc, this.#job, (m) => this.#onMessage(m));
    this.#timer = setInterval(() => this.#tick(), HEARTBEAT_MS);
    nc.publish(headBeat(this.#job));
    const o = { processes: this.#o.numWorkers, cluster: c, initializer: null, initargs: [], maxtasksperchild: null, loader: true };
    this.#placement = new Placement(nc, this.#job, o, this.#root, this.#hostTimeout);
    try {
      await this.#placement.place(me, c.connectTimeout ?? 10_000);
    } catch (e) {
      await this.stop();
      throw e;
    }
    for (const host of this.#placement.hosts)
      for (let index = 0; index < host.slots; index++) this.#seats.push({ host, index, alive: !host.here, pid: null });
  }

  bind(so: LoaderSetOptions, fail: (e: Error) => void): LoaderSet {
    this.#so = so;
    this.#fail = fail;
    for (const host of this.#placement!.hosts) {
      const ids = this.#seats.flatMap((s, id) => (s.host === host ? [id] : []));
      if (host.here) {
        this.#localBase = ids[0]!;
        this.#local = new mp.LoaderWorkerHost({
          size: ids.length,
          startMethod: so.startMethod,
          args: (i) => [...(so.args(ids[i]!) as WorkerArgs).slice(0, 2), ids[i]!, host.name],
          onMessage: (i, m) => so.onMessage(ids[i]!, m),
          onExit: (i, exit) => so.onExit(ids[i]!, exit),
        });
      } else {
        const args = ids.map((id) => this.#remoteArgs(id));
        this.#wire!.send(host.name, { op: 'lstart', ids, args, startMethod: so.startMethod });
      }
    }
    return this;
  }

  /** Worker `id`'s start arguments as they travel: its spec's targets as paths under the root. */
  #remoteArgs(id: number): unknown[] {
    const [spec, replica] = this.#so!.args(id) as WorkerArgs;
    return [wireSpec(this.#root, spec), replica];
  }

  #onMessage(m: ToHead): void {
    const so = this.#so;
    if (so === null || this.#stopped !== null) {
      if (m.op === 'closed') this.#closedWaiters.get(m.host)?.();
      else if (m.op === 'lmsg') releaseBatch(m.value);
      return;
    }
    if (m.op === 'lmsg') {
      const seat = this.#seats[m.id];
      if (seat !== undefined) seat.pid = m.pid;
      so.onMessage(m.id, m.value);
    } else if (m.op === 'lexit') {
      const seat = this.#seats[m.id];
      if (seat !== undefined) seat.alive = false;
      const error = m.error === null ? null : errorFromData(m.error, m.host);
      so.onExit(m.id, { pid: m.pid, exitCode: m.exitCode, signalName: m.signalName, error });
    } else if (m.op === 'lfailed') this.#fail(errorFromData(m.error, m.host));
  }

  #tick(): void {
    const nc = this.#nc;
    if (!nc || nc.isClosed()) return;
    nc.publish(headBeat(this.#job));
    for (const h of this.#placement?.expire(performance.now()) ?? []) {
      const ids = this.#seats.flatMap((s, id) => (s.host === h ? [id] : []));
      if (h.here) void this.#local?.terminate({ grace: 0 });
      for (const id of ids) this.#seats[id]!.alive = false;
      this.#fail(
        new mp.HostLostError(
          `Host ${h.name} of this cluster DataLoader was silent for ${this.#hostTimeout} ms (its agent died or is cut off): ` +
            `the batches its workers ${ids.join(', ')} held are lost. loader.stateDict() resumes the epoch on the hosts left.`,
          h.name,
        ),
      );
      this.#closedWaiters.get(h.name)?.();
    }
  }

  #seat(id: number): Seat {
    return this.#seats[id]!;
  }

  pid(id: number): number | null {
    const s = this.#seat(id);
    return s.host.here ? (this.#local?.pid(id - this.#localBase) ?? null) : s.alive ? s.pid : null;
  }

  isAlive(id: number): boolean {
    const s = this.#seat(id);
    if (s.host.here) return this.#local?.isAlive(id - this.#localBase) ?? false;
    return s.alive && !s.host.lost;
  }

  isHere(id: number): boolean {
    return this.#seat(id).host.here;
  }

  send(id: number, value: unknown): boolean {
    const s = this.#seat(id);
    if (s.host.here) return this.#local?.send(id - this.#localBase, value) ?? false;
    if (!s.alive || s.host.lost) return false;
    this.#wire!.send(s.host.name, { op: 'lsend', id, value });
    return true;
  }

  replace(id: number): void {
    const s = this.#seat(id);
    if (s.host.here) return this.#local?.replace(id - this.#localBase);
    if (s.host.lost) return;
    s.alive = true;
    s.pid = null;
    this.#wire!.send(s.host.name, { op: 'lreplace', id, args: this.#remoteArgs(id) });
  }

  keepAlive(on: boolean): void {
    this.#local?.keepAlive(on);
  }

  /** This host's workers, then every live host's (their agents stop theirs and free the slots), then the connection. */
  stop(options?: StopOptions): Promise<void> {
    this.#stopped ??= (async () => {
      await this.#local?.stop(options);
      const nc = this.#nc;
      if (nc === null) return;
      const live = (this.#placement?.hosts ?? []).filter((h) => !h.lost && !h.closed);
      const gone = live.map((h) => new Promise<void>((r) => this.#closedWaiters.set(h.name, r)));
      for (const h of live) this.#wire!.send(h.name, { op: 'close' });
      await Promise.all(gone); // a host lost meanwhile resolves its waiter too (#tick)
      if (this.#timer) clearInterval(this.#timer);
      this.#placement?.unsubscribe();
      await Promise.race([nc.flush().catch(() => {}), new Promise((r) => setTimeout(r, 1000).unref())]);
      await nc.close().catch(() => {});
    })();
    return this.#stopped;
  }
}

/** A batch that came after its iteration ended: its tensors (fresh shared ones of this host) go. */
function releaseBatch(v: unknown): void {
  const m = v as { kind?: string; data?: unknown };
  if (m.kind === 'batch') mp.releaseTensors(m.data);
}

export async function placeLoaderWorkers(o: RemoteLoaderOptions): Promise<RemoteLoader> {
  const loader = new ClusterLoader(o);
  await loader.place();
  return loader;
}
