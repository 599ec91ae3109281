// The head of a cluster Pool (NOTE [Cluster pool]): places the pool's slots on agents, sends
// chunks to hosts with room, puts results back in order, and turns a silent host into
// HostLostError for what it held.
import { randomBytes } from 'node:crypto';
import { isAbsolute, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { NatsConnection, Subscription } from '@nats-io/transport-node';
import * as mp from '../index.js';
import type { RemotePool, RemotePoolOptions } from '../pool/cluster-link.js';
import { connectCluster, hostId } from './connect.js';
import { Receiver, Sender, decode, encode, errorFromData } from './codec.js';
import {
  DEFAULT_HOST_TIMEOUT_MS,
  DISCOVER,
  HEARTBEAT_MS,
  agentBeat,
  headBeat,
  headSubject,
  jobSubject,
  openSubject,
  type OpenRequest,
  type Offer,
  type ToAgent,
  type ToHead,
  type WireTarget,
} from './protocol.js';

interface CallState {
  results: unknown[][];
  remaining: number;
  settled: boolean;
  resolve(values: unknown[][]): void;
  reject(e: Error): void;
  /** Called with each chunk's values as it arrives (imapUnordered). */
  each?: (values: unknown[]) => void;
}

interface Chunk {
  seq: number;
  call: CallState;
  index: number;
  target: WireTarget;
  items: readonly unknown[];
  star: boolean;
}

interface Host {
  name: string;
  slots: number;
  held: Map<number, Chunk>;
  lastBeat: number;
  beat: Subscription;
  lost: boolean;
  closed: boolean;
}

export class ClusterPool implements RemotePool {
  readonly #o: RemotePoolOptions;
  readonly #job = randomBytes(6).toString('hex');
  readonly #root: string;
  readonly #hostTimeout: number;
  readonly #ready: Promise<void>;
  #nc: NatsConnection | null = null;
  #send: Sender | null = null;
  /** Hosts in placement order: this host's first. */
  #hosts: Host[] = [];
  readonly #queue: Chunk[] = [];
  #seq = 0;
  #timer: NodeJS.Timeout | null = null;
  #ended: Promise<void> | null = null;
  #closing = false;

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
    this.#send = new Sender(nc);
    const receiver = new Receiver();
    nc.subscribe(headSubject(this.#job), {
      callback: (_e, m) => {
        const got = receiver.take(m);
        if (got) this.#onResult(got.value as ToHead);
      },
    });
    this.#timer = setInterval(() => this.#tick(), HEARTBEAT_MS);
    nc.publish(headBeat(this.#job));
    try {
      await this.#place(me, c.connectTimeout ?? 10_000);
    } catch (e) {
      await this.#shutdown(true);
      throw e;
    }
  }

  /** Takes `processes` slots from the agents, this host's first, then the others' by name. */
  async #place(me: string, timeout: number): Promise<void> {
    const nc = this.#nc!;
    const deadline = performance.now() + timeout;
    let want = this.#o.processes;
    let seen = 0;
    while (want > 0) {
      const offers: Offer[] = [];
      for await (const m of await nc.requestMany(DISCOVER, undefined, { strategy: 'stall', stall: 150, maxWait: 1000 }))
        offers.push(decode(m.data) as Offer);
      offers.sort((a, b) => (a.host === me ? -1 : b.host === me ? 1 : a.host < b.host ? -1 : a.host > b.host ? 1 : 0));
      seen = offers.reduce((n, o) => n + o.free, 0) + (this.#o.processes - want);
      for (const offer of offers) {
        if (want === 0) break;
        if (this.#hosts.some((h) => h.name === offer.host)) continue;
        const n = Math.min(want, offer.free);
        if (n < 1) continue;
        if (await this.#open(offer.host, n)) want -= n;
      }
      if (want > 0 && performance.now() > deadline)
        throw new mp.ClusterUnavailableError(
          `The agents at ${String(this.#o.cluster.servers)} offer ${seen} free slots; this Pool asks for ${this.#o.processes}. Start more agents (npx tensorproc agent --server URL --slots N), or ask for fewer processes.`,
        );
    }
  }

  async #open(name: string, slots: number): Promise<boolean> {
    const nc = this.#nc!;
    const req: OpenRequest = {
      job: this.#job,
      slots,
      leaseMs: this.#hostTimeout,
      initializer: this.#o.initializer ? this.#wire(this.#o.initializer) : null,
      initargs: this.#o.initargs,
      maxtasksperchild: this.#o.maxtasksperchild,
    };
    const host: Host = {
      name,
      slots,
      held: new Map(),
      lastBeat: performance.now(),
      lost: false,
      closed: false,
      beat: nc.subscribe(agentBeat(name), {
        callback: () => {
          host.lastBeat = performance.now();
        },
      }),
    };
    let reply: { ok: boolean; error?: Record<string, unknown> };
    try {
      reply = decode((await nc.request(openSubject(name), encode(req), { timeout: 5000 })).data) as typeof reply;
    } catch {
      reply = { ok: false };
    }
    if (!reply.ok) {
      host.beat.unsubscribe();
      return false;
    }
    this.#hosts.push(host);
    return true;
  }

  /** A target as agents resolve it: a path under the code root, or a package specifier. */
  #wire(t: mp.Target): WireTarget {
    if (t === null || typeof t !== 'object' || !(typeof t.module === 'string' || t.module instanceof URL))
      throw new mp.InvalidArgumentError("A cluster Pool's target is { module, export }, its module under cluster.root (docs/cluster.md).");
    const exp = t.export ?? 'default';
    const m = t.module instanceof URL ? t.module.href : t.module;
    let file: string | null = null;
    if (m.startsWith('file:')) file = fileURLToPath(m);
    else if (isAbsolute(m)) file = m;
    else if (m.startsWith('.') || /\.[cm]?js$/.test(m)) file = resolve(this.#root, m);
    if (file === null) return { path: null, specifier: m, export: exp };
    const rel = relative(this.#root, file);
    if (rel.startsWith('..') || isAbsolute(rel))
      throw new mp.InvalidArgumentError(
        `The target ${m} is not under the cluster's code root ${this.#root}: agents find modules under their --root (set cluster.root).`,
      );
    return { path: rel.split(sep).join('/'), specifier: null, export: exp };
  }

  #call(
    target: mp.Target,
    items: readonly unknown[],
    chunksize: number,
    star: boolean,
    signal?: AbortSignal,
    each?: (v: unknown[]) => void,
  ): Promise<unknown[][]> {
    const wire = this.#wire(target);
    return new Promise<unknown[][]>((res, rej) => {
      const n = Math.ceil(items.length / chunksize);
      const call: CallState = {
        results: new Array(n),
        remaining: n,
        settled: false,
        resolve: res,
        reject: rej,
        each,
      };
      if (n === 0) return res([]);
      if (signal) {
        const onAbort = (): void => this.#fail(call, new mp.AbortError(undefined, { cause: signal.reason }));
        if (signal.aborted) return onAbort();
        signal.addEventListener('abort', onAbort, { once: true });
      }
      for (let i = 0; i < n; i++) {
        this.#queue.push({ seq: this.#seq++, call, index: i, target: wire, items: items.slice(i * chunksize, (i + 1) * chunksize), star });
      }
      this.#pump();
    });
  }

  async map(
    target: mp.Target,
    items: readonly unknown[],
    chunksize: number | undefined,
    star: boolean,
    signal?: AbortSignal,
  ): Promise<unknown[]> {
    await this.#ready;
    const size = chunksize ?? Math.max(1, Math.ceil(items.length / (4 * this.#o.processes)));
    return (await this.#call(target, items, size, star, signal)).flat(1);
  }

  async apply(target: mp.Target, args: readonly unknown[], signal?: AbortSignal): Promise<unknown> {
    await this.#ready;
    return (await this.#call(target, [args], 1, true, signal))[0]![0];
  }

  async *imap(
    target: mp.Target,
    iterable: AsyncIterable<unknown> | Iterable<unknown>,
    chunksize: number,
    ordered: boolean,
  ): AsyncIterableIterator<unknown> {
    await this.#ready;
    const items: unknown[] = [];
    for await (const x of iterable) items.push(x);
    if (ordered) {
      yield* (await this.#call(target, items, chunksize, false)).flat(1);
      return;
    }
    const ready: unknown[][] = [];
    let wake: (() => void) | null = null;
    const all = this.#call(target, items, chunksize, false, undefined, (v) => {
      ready.push(v);
      wake?.();
    });
    let finished = false;
    let failure: unknown = null;
    all
      .then(
        () => (finished = true),
        (e: unknown) => {
          failure = e;
          finished = true;
        },
      )
      .finally(() => wake?.());
    for (;;) {
      while (ready.length) yield* ready.shift()!;
      if (failure !== null) throw failure;
      if (finished) return;
      await new Promise<void>((r) => (wake = r));
      wake = null;
    }
  }

  /** Sends queued chunks to hosts with room: at most two chunks a slot in flight, this host's first. */
  #pump(): void {
    if (this.#onIdle !== null && this.#isIdle()) {
      this.#onIdle();
      this.#onIdle = null;
    }
    if (this.#queue.length === 0) return;
    for (const h of this.#hosts) {
      if (h.lost || h.closed) continue;
      while (this.#queue.length > 0 && h.held.size < 2 * h.slots) {
        const c = this.#queue.shift()!;
        if (c.call.settled) continue;
        h.held.set(c.seq, c);
        this.#send!.send(jobSubject(h.name, this.#job), {
          op: 'run',
          seq: c.seq,
          target: c.target,
          items: c.items,
          star: c.star,
        } satisfies ToAgent);
      }
    }
    if (this.#queue.length > 0 && !this.#hosts.some((h) => !h.lost && !h.closed)) {
      const e = new mp.HostLostError(
        'Every host of this cluster Pool is lost: nothing is left to run its tasks.',
        this.#hosts[0]?.name ?? '',
      );
      for (const c of this.#queue.splice(0)) this.#fail(c.call, e);
    }
  }

  #onResult(m: ToHead): void {
    const host = this.#hosts.find((h) => h.name === m.host);
    if (!host) return;
    if (m.op === 'closed') {
      host.closed = true;
      this.#closedWaiters.get(host.name)?.();
      return;
    }
    const c = host.held.get(m.seq);
    if (!c) return; // its host was declared lost meanwhile: already rejected
    host.held.delete(m.seq);
    if (m.op === 'done') {
      const call = c.call;
      if (!call.settled) {
        call.results[c.index] = m.values;
        call.each?.(m.values);
        if (--call.remaining === 0) {
          call.settled = true;
          call.resolve(call.results);
        }
      }
    } else this.#fail(c.call, errorFromData(m.error, m.host));
    this.#pump();
  }

  #fail(call: CallState, e: Error): void {
    if (call.settled) return;
    call.settled = true;
    call.reject(e);
  }

  #tick(): void {
    const nc = this.#nc;
    if (!nc || nc.isClosed()) return;
    nc.publish(headBeat(this.#job));
    const now = performance.now();
    for (const h of this.#hosts) {
      if (h.lost || h.closed || now - h.lastBeat <= this.#hostTimeout) continue;
      h.lost = true;
      const e = new mp.HostLostError(
        `Host ${h.name} of this cluster Pool was silent for ${this.#hostTimeout} ms (its agent died or is cut off): the tasks it held are lost.`,
        h.name,
      );
      for (const c of h.held.values()) this.#fail(c.call, e);
      h.held.clear();
      this.#closedWaiters.get(h.name)?.();
    }
    this.#pump();
  }

  readonly #closedWaiters = new Map<string, () => void>();

  async #shutdown(terminate: boolean): Promise<void> {
    const nc = this.#nc;
    if (!nc) return;
    const live = this.#hosts.filter((h) => !h.lost && !h.closed);
    const gone = live.map(
      (h) =>
        new Promise<void>((r) => {
          this.#closedWaiters.set(h.name, r);
        }),
    );
    for (const h of live) this.#send!.send(jobSubject(h.name, this.#job), { op: terminate ? 'terminate' : 'close' } satisfies ToAgent);
    await Promise.all(gone); // a host lost meanwhile resolves its waiter too (#tick)
    if (this.#timer) clearInterval(this.#timer);
    for (const h of this.#hosts) h.beat.unsubscribe();
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
    for (const c of this.#queue.splice(0)) this.#fail(c.call, e);
    for (const h of this.#hosts) for (const c of h.held.values()) this.#fail(c.call, e);
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
    return this.#queue.length === 0 && !this.#hosts.some((h) => h.held.size > 0 && !h.lost);
  }

  #onIdle: (() => void) | null = null;

  join(): Promise<void> {
    return this.#ended ?? Promise.reject(new mp.PoolRunningError('join(): the pool is still running. Call close() or terminate() first.'));
  }

  pids(): number[] {
    return [];
  }
}

export function createRemotePool(o: RemotePoolOptions): RemotePool {
  return new ClusterPool(o);
}
