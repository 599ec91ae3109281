// The agent, `npx tensorproc agent --server nats://HOST:4222 [--slots N] [--root DIR]`: one per
// host. It offers N worker slots to cluster Pools and runs their chunks in local Pools of its
// own (NOTE [Cluster pool]); it holds this host's NATS connection.
import { resolve, sep } from 'node:path';
import { pathToFileURL } from 'node:url';
import { availableParallelism } from 'node:os';
import type { Msg, NatsConnection, Subscription } from '@nats-io/transport-node';
import * as mp from '../index.js';
import type { EnvName } from '../env.js';
import { connectCluster, hostId, type ClusterOptions } from './connect.js';
import { Receiver, Sender, decode, encode, errorToData } from './codec.js';
import { AgentLoader } from './loader-agent.js';
import {
  DISCOVER,
  HEARTBEAT_MS,
  agentBeat,
  bootId,
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

export interface AgentOptions extends Omit<ClusterOptions, 'root' | 'hostTimeout' | 'connectTimeout'> {
  slots?: number;
  root?: string;
  /** Called once the agent is listening (the CLI prints a line). */
  onReady?: (info: { host: string; slots: number }) => void;
  log?: (line: string) => void;
}

const HOST_ENV = 'TENSORPROC_HOST_ID' satisfies EnvName;

interface Job {
  id: string;
  /** Null for slots the head runs itself, on this machine (NOTE [Same-host slots]): only held here. */
  pool: mp.Pool | null;
  /** A cluster DataLoader's workers (NOTE [Cluster loader]), else null. */
  loader: AgentLoader | null;
  slots: number;
  sub: Subscription;
  beat: Subscription;
  lease: NodeJS.Timeout;
  leaseMs: number;
  running: Set<Promise<unknown>>;
  /** The chunks given to `pool` and not settled, by seq: what a head's 'cancel' aborts. */
  cancels: Map<number, AbortController>;
}

export class Agent {
  readonly host: string;
  readonly slots: number;
  readonly root: string;
  readonly #nc: NatsConnection;
  readonly #send: Sender;
  readonly #jobs = new Map<string, Job>();
  readonly #log: (line: string) => void;
  readonly #timer: NodeJS.Timeout;
  readonly #subs: Subscription[] = [];
  #closed: Promise<void> | null = null;

  private constructor(nc: NatsConnection, host: string, slots: number, root: string, log: (line: string) => void) {
    this.#nc = nc;
    this.#send = new Sender(nc);
    this.host = host;
    this.slots = slots;
    this.root = root;
    this.#log = log;
    this.#subs.push(nc.subscribe(DISCOVER, { callback: (_e, m) => this.#offer(m) }));
    this.#subs.push(nc.subscribe(openSubject(host), { callback: (_e, m) => this.#open(m) }));
    this.#timer = setInterval(() => this.#beat(), HEARTBEAT_MS);
    this.#beat();
  }

  static async start(o: AgentOptions): Promise<Agent> {
    const host = hostId(o.hostId);
    const slots = o.slots ?? availableParallelism();
    if (!Number.isInteger(slots) || slots < 1)
      throw new mp.InvalidArgumentError(`agent: --slots must be a positive integer (got ${String(slots)}).`);
    const root = resolve(o.root ?? process.cwd());
    // Workers report the host they run on; package specifiers resolve from the code root.
    process.env[HOST_ENV] = host;
    process.chdir(root);
    const nc = await connectCluster({ ...o, name: `tensorproc agent ${host}` });
    const agent = new Agent(nc, host, slots, root, o.log ?? (() => {}));
    await nc.flush();
    o.onReady?.({ host, slots });
    return agent;
  }

  get free(): number {
    let used = 0;
    for (const j of this.#jobs.values()) used += j.slots;
    return this.slots - used;
  }

  #beat(): void {
    if (!this.#nc.isClosed()) this.#nc.publish(agentBeat(this.host));
  }

  #offer(m: Msg): void {
    const offer: Offer = { host: this.host, slots: this.slots, free: this.free, boot: bootId(), cancel: true };
    m.respond(encode(offer));
  }

  #open(m: Msg): void {
    let req: OpenRequest;
    try {
      req = decode(m.data) as OpenRequest;
      if (this.#jobs.has(req.job)) throw new mp.InvalidArgumentError(`job ${req.job} is already open here`);
      if (!Number.isInteger(req.slots) || req.slots < 1 || req.slots > this.free)
        throw new mp.ClusterUnavailableError(`host ${this.host} has ${this.free} free slots, ${req.slots} asked`);
      const reply = (v: ToHead): void => {
        if (!this.#nc.isClosed()) this.#send.send(headSubject(req.job), v);
      };
      const loader = req.loader && !req.local ? new AgentLoader(this.host, this.root, reply) : null;
      const pool =
        req.local || req.loader
          ? null
          : new mp.Pool({
              processes: req.slots,
              initializer: req.initializer ? this.#target(req.initializer) : null,
              initargs: req.initargs,
              maxtasksperchild: req.maxtasksperchild,
            });
      const job: Job = {
        id: req.job,
        pool,
        loader,
        slots: req.slots,
        leaseMs: req.leaseMs,
        running: new Set(),
        cancels: new Map(),
        sub: this.#nc.subscribe(jobSubject(this.host, req.job), { callback: (_e, msg) => this.#onJob(job, msg) }),
        beat: this.#nc.subscribe(headBeat(req.job), { callback: () => this.#renew(job) }),
        lease: setTimeout(() => this.#expire(job), req.leaseMs),
      };
      this.#jobs.set(req.job, job);
      this.#log(
        `job ${req.job}: ${req.slots} slots${req.local ? ', run by its head on this machine' : loader !== null ? ', DataLoader workers' : ''}`,
      );
      m.respond(encode({ ok: true }));
    } catch (e) {
      m.respond(encode({ ok: false, error: errorToData(e) }));
    }
  }

  readonly #receivers = new Map<string, Receiver>();

  #onJob(job: Job, msg: Msg): void {
    let r = this.#receivers.get(job.id);
    if (!r) this.#receivers.set(job.id, (r = new Receiver()));
    const got = r.take(msg);
    if (!got) return;
    const m = got.value as ToAgent;
    if (m.op === 'run') this.#run(job, m);
    else if (m.op === 'cancel') job.cancels.get(m.seq)?.abort();
    else if (m.op === 'lstart' || m.op === 'lreplace' || m.op === 'lsend') {
      if (job.loader !== null) job.loader.take(m);
    } else if (m.op === 'close') void this.#end(job, false);
    else if (m.op === 'terminate') void this.#end(job, true);
  }

  #run(job: Job, m: Extract<ToAgent, { op: 'run' }>): void {
    const reply = (v: ToHead): void => {
      if (!this.#nc.isClosed()) this.#send.send(headSubject(job.id), v);
    };
    let p: Promise<unknown[]>;
    const cancel = m.abortable === true ? new AbortController() : null;
    if (cancel !== null) job.cancels.set(m.seq, cancel);
    try {
      if (job.pool === null) throw new mp.InvalidArgumentError(`job ${job.id}: its head runs its workers itself, on this machine`);
      const target = this.#target(m.target);
      const o = { chunksize: m.items.length, signal: cancel?.signal };
      p = m.star ? job.pool.starmap(target, m.items as unknown[][], o) : job.pool.map(target, m.items, o);
    } catch (e) {
      p = Promise.reject(e);
    }
    // The chunk's tensors arrived as this host's shared tensors (codec.ts), and its results came
    // back from the worker as such: once the reply has copied the results out, both go back to
    // this process's segment cache at once. Left to the collector, every tensor took a fresh
    // segment, whose pages the next copy faulted in (W5 (b): half the agent's time at 16 MiB).
    const done = p
      .then(
        (values) => {
          try {
            reply({ op: 'done', host: this.host, seq: m.seq, values });
          } finally {
            mp.releaseTensors(values);
          }
        },
        (e: unknown) => reply({ op: 'failed', host: this.host, seq: m.seq, error: errorToData(e) }),
      )
      .finally(() => {
        job.cancels.delete(m.seq);
        mp.releaseTensors(m.items);
      });
    job.running.add(done);
    void done.finally(() => job.running.delete(done));
  }

  /** A target under the code root (never outside it), or a package specifier resolved from the root. */
  #target(t: WireTarget): mp.Target {
    if (t.path === null) return { module: t.specifier ?? '', export: t.export };
    const file = resolve(this.root, t.path);
    if (!file.startsWith(this.root + sep))
      throw new mp.InvalidArgumentError(`The target ${t.path} is outside this agent's code root ${this.root}.`);
    return { module: pathToFileURL(file), export: t.export };
  }

  #renew(job: Job): void {
    job.lease.refresh();
  }

  #expire(job: Job): void {
    this.#log(`job ${job.id}: its head is silent for ${job.leaseMs} ms; its workers are stopped`);
    void this.#end(job, true);
  }

  async #end(job: Job, terminate: boolean): Promise<void> {
    if (this.#jobs.get(job.id) !== job) return;
    this.#jobs.delete(job.id);
    this.#receivers.delete(job.id);
    clearTimeout(job.lease);
    job.beat.unsubscribe();
    if (job.pool !== null) {
      if (terminate) job.pool.terminate();
      else {
        await Promise.allSettled([...job.running]);
        job.pool.close();
      }
      await job.pool.join().catch(() => {});
    }
    await job.loader?.end(terminate);
    job.sub.unsubscribe();
    if (!this.#nc.isClosed()) this.#send.send(headSubject(job.id), { op: 'closed', host: this.host } satisfies ToHead);
    this.#log(`job ${job.id}: ${terminate ? 'terminated' : 'closed'}`);
  }

  /** Stops every pool's workers, then leaves the cluster. */
  close(): Promise<void> {
    this.#closed ??= (async () => {
      clearInterval(this.#timer);
      for (const s of this.#subs) s.unsubscribe();
      await Promise.all([...this.#jobs.values()].map((j) => this.#end(j, true)));
      // Bounded: with its server gone too (a machine shutting down), a drain would wait for
      // a reconnection for ever, and the agent must still exit.
      await Promise.race([this.#nc.flush().catch(() => {}), new Promise((r) => setTimeout(r, 1000).unref())]);
      await this.#nc.close().catch(() => {});
    })();
    return this.#closed;
  }
}

/** The CLI's `agent` command: runs until SIGINT or SIGTERM. */
export async function runAgent(o: AgentOptions): Promise<void> {
  const agent = await Agent.start(o);
  await new Promise<void>((done) => {
    const stop = (): void => {
      void agent.close().then(done);
    };
    process.once('SIGINT', stop);
    process.once('SIGTERM', stop);
  });
}
