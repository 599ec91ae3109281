// Where a cluster Pool's slots are (NOTE [Cluster pool]): taken from the agents' offers, this
// host's first (run by the head itself: NOTE [Same-host slots]), then the others' by name; a
// host whose agent falls silent is lost.
import type { NatsConnection, Subscription } from '@nats-io/transport-node';
import * as mp from '../index.js';
import type { RemotePoolOptions } from '../pool/cluster-link.js';
import { decode, encode } from './codec.js';
import { DISCOVER, agentBeat, bootId, openSubject, type OpenRequest, type Offer } from './protocol.js';
import type { Chunk } from './pool-calls.js';
import { LocalSlots } from './pool-local.js';
import { wireTarget } from './pool-wire.js';

export interface Host {
  name: string;
  slots: number;
  /** Chunks given to it and not returned, by seq. */
  held: Map<number, Chunk>;
  lastBeat: number;
  beat: Subscription;
  lost: boolean;
  closed: boolean;
  /** This machine's slots, run by the head: null for an agent's own. */
  local: LocalSlots | null;
  /** On the head's own machine (NOTE [Same-host slots]): a Pool's have `local`, a loader's are the loader's (NOTE [Cluster loader]). */
  here: boolean;
  /** Its agent takes 'cancel' (Offer.cancel): an aborted call's chunks there are cancelled. */
  cancels: boolean;
}

/** A Pool's options, or a loader's (`loader`: the agents start DataLoader workers, none at open). */
export type PlacementOptions = RemotePoolOptions & { loader?: boolean };

export class Placement {
  /** In placement order: this host's first. */
  readonly hosts: Host[] = [];
  readonly #nc: NatsConnection;
  readonly #job: string;
  readonly #o: PlacementOptions;
  readonly #root: string;
  readonly #hostTimeout: number;

  constructor(nc: NatsConnection, job: string, o: PlacementOptions, root: string, hostTimeout: number) {
    this.#nc = nc;
    this.#job = job;
    this.#o = o;
    this.#root = root;
    this.#hostTimeout = hostTimeout;
  }

  /** Takes `processes` slots from the agents, this host's first, then the others' by name. */
  async place(me: string, timeout: number): Promise<void> {
    const deadline = performance.now() + timeout;
    const boot = bootId();
    let want = this.#o.processes;
    let seen = 0;
    while (want > 0) {
      const offers: Offer[] = [];
      for await (const m of await this.#nc.requestMany(DISCOVER, undefined, { strategy: 'stall', stall: 150, maxWait: 1000 }))
        offers.push(decode(m.data) as Offer);
      offers.sort((a, b) => (a.host === me ? -1 : b.host === me ? 1 : a.host < b.host ? -1 : a.host > b.host ? 1 : 0));
      seen = offers.reduce((n, o) => n + o.free, 0) + (this.#o.processes - want);
      for (const offer of offers) {
        if (want === 0) break;
        if (this.hosts.some((h) => h.name === offer.host)) continue;
        const n = Math.min(want, offer.free);
        if (n < 1) continue;
        const here = offer.host === me && boot !== '' && offer.boot === boot;
        if (await this.#open(offer.host, n, here, offer.cancel === true)) want -= n;
      }
      if (want > 0 && performance.now() > deadline)
        throw new mp.ClusterUnavailableError(
          `The agents at ${String(this.#o.cluster.servers)} offer ${seen} free slots; this ${this.#o.loader ? 'DataLoader' : 'Pool'} asks for ${this.#o.processes}. Start more agents (npx tensorproc agent --server URL --slots N), or ask for fewer ${this.#o.loader ? 'workers (numWorkers)' : 'processes'}.`,
        );
    }
  }

  async #open(name: string, slots: number, here: boolean, cancels: boolean): Promise<boolean> {
    const o = this.#o;
    const req: OpenRequest = {
      job: this.#job,
      slots,
      leaseMs: this.#hostTimeout,
      initializer: o.initializer ? wireTarget(this.#root, o.initializer) : null,
      initargs: here ? [] : o.initargs,
      maxtasksperchild: o.maxtasksperchild,
      local: here || undefined,
      loader: o.loader || undefined,
    };
    const host: Host = {
      name,
      slots,
      held: new Map(),
      lastBeat: performance.now(),
      lost: false,
      closed: false,
      local: null,
      here,
      cancels,
      beat: this.#nc.subscribe(agentBeat(name), {
        callback: () => {
          host.lastBeat = performance.now();
        },
      }),
    };
    let reply: { ok: boolean; error?: Record<string, unknown> };
    try {
      reply = decode((await this.#nc.request(openSubject(name), encode(req), { timeout: 5000 })).data) as typeof reply;
    } catch {
      reply = { ok: false };
    }
    if (!reply.ok) {
      host.beat.unsubscribe();
      return false;
    }
    if (here && !o.loader) host.local = new LocalSlots(name, slots, this.#root, o);
    this.hosts.push(host);
    return true;
  }

  /** The hosts that can take chunks. */
  live(): Host[] {
    return this.hosts.filter((h) => !h.lost && !h.closed);
  }

  /** This machine's slots, when they are all the live slots there are (NOTE [Same-host slots]). */
  onlyLocal(): LocalSlots | null {
    let local: LocalSlots | null = null;
    for (const h of this.hosts) {
      if (h.lost || h.closed) continue;
      if (h.local === null) return null;
      local = h.local;
    }
    return local;
  }

  /** Marks lost, and returns, the hosts silent for longer than the host timeout. */
  expire(now: number): Host[] {
    const out: Host[] = [];
    for (const h of this.hosts) {
      if (h.lost || h.closed || now - h.lastBeat <= this.#hostTimeout) continue;
      h.lost = true;
      out.push(h);
    }
    return out;
  }

  unsubscribe(): void {
    for (const h of this.hosts) h.beat.unsubscribe();
  }
}
