// cluster.Queue: a queue every host reaches, on a JetStream work-queue stream (NOTE [Cluster queue]).
//
// NOTE [Cluster queue]
// One stream per queue (TP_Q_<name>, subject tp.q.<name>, retention workqueue: a message is
// removed once acknowledged) and one durable pull consumer that every get() of every host
// shares, with explicit acks:
//  - at-least-once: a message handed to a consumer that dies before acking it is redelivered
//    to another after `ackWait` ms (JetStream's AckWait); get() acks before it returns the
//    value (ownership passes to the caller, as with a local queue), get({ ack: 'manual' })
//    returns it with ack() and nak() for work that must not be lost with its consumer;
//  - no duplicate after a producer's retry: every put carries a Nats-Msg-Id (the caller's
//    `id`, else a fresh random one), which put() keeps across its own retries (a server lost
//    mid-publish, an ack that timed out), and the stream drops a second message of one id
//    within its duplicate window (2 minutes);
//  - `replicas: 3` on a cluster of three servers or more keeps the stream through the loss of
//    any one of them (RAFT; the client reconnects to a survivor).
// Values travel as the Pool's do (NOTE [Cluster wire]), each in one message under the
// server's max_payload: a larger one is refused (put a smaller value, or raise max_payload).
import { randomUUID } from 'node:crypto';
import type { NatsConnection } from '@nats-io/transport-node';
import {
  AckPolicy,
  RetentionPolicy,
  StorageType,
  jetstream,
  jetstreamManager,
  type Consumer,
  type JetStreamClient,
  type JsMsg,
} from '@nats-io/jetstream';
import * as mp from '../index.js';
import { decode, encode } from './codec.js';
import { connectCluster, type ClusterOptions } from './connect.js';

export interface QueueOptions extends Omit<ClusterOptions, 'root' | 'hostTimeout'> {
  /** The queue's name: every host that names it reaches the same queue. Letters, digits, '_' and '-'. */
  name: string;
  /** Copies of the stream (1, or 3 on a cluster of three servers or more). Default 1. */
  replicas?: number;
  /** A message handed out and not acked for this long (ms) goes to another consumer. Default 30000. */
  ackWait?: number;
}

export interface GetOptions {
  /** Milliseconds to wait for a message (default: for ever); then QueueEmptyError. */
  timeout?: number;
}

export interface PutOptions {
  /** The message's id: a put of an id already in the queue (within 2 minutes) adds nothing. */
  id?: string;
}

/** A message taken with get({ ack: 'manual' }): ack() once done with it, or nak() to give it back at once. */
export interface Held<T> {
  value: T;
  /** How many times it has been handed out (2 or more: a consumer died holding it, or nak()ed it). */
  deliveries: number;
  ack(): Promise<void>;
  nak(): void;
}

/** How long put() retries a publish that was not acknowledged. */
const PUT_RETRY_MS = 20_000;

export class Queue<T = unknown> {
  readonly name: string;
  readonly #o: QueueOptions;
  readonly #ready: Promise<{ nc: NatsConnection; js: JetStreamClient }>;
  #consumer: Consumer | null = null;
  readonly #stream: string;
  readonly #subject: string;
  #closed = false;

  constructor(options: QueueOptions) {
    if (options === null || typeof options !== 'object' || typeof options.name !== 'string' || !/^[A-Za-z0-9_-]{1,64}$/.test(options.name))
      throw new mp.InvalidArgumentError("new cluster.Queue({ name, servers }): name is 1-64 letters, digits, '_' or '-'.");
    this.name = options.name;
    this.#o = options;
    this.#stream = `TP_Q_${options.name}`;
    this.#subject = `tp.q.${options.name}`;
    this.#ready = this.#open();
    this.#ready.catch(() => {});
  }

  async #open(): Promise<{ nc: NatsConnection; js: JetStreamClient }> {
    const nc = await connectCluster({ ...this.#o, name: `tensorproc queue ${this.name}` });
    // A cluster just started elects its JetStream leader first: until then every request fails.
    const until = performance.now() + (this.#o.connectTimeout ?? 10_000);
    for (;;) {
      try {
        return await this.#define(nc);
      } catch (e) {
        if (performance.now() < until) {
          await new Promise((r) => setTimeout(r, 200));
          continue;
        }
        await nc.close();
        throw new mp.ClusterUnavailableError(
          `cluster.Queue ${this.name}: JetStream is not available at ${String(this.#o.servers)} (start nats-server with -js, and replicas <= servers): ${(e as Error).message}`,
          { cause: e },
        );
      }
    }
  }

  async #define(nc: NatsConnection): Promise<{ nc: NatsConnection; js: JetStreamClient }> {
    {
      const jsm = await jetstreamManager(nc);
      const config = {
        name: this.#stream,
        subjects: [this.#subject],
        retention: RetentionPolicy.Workqueue,
        storage: StorageType.File,
        num_replicas: this.#o.replicas ?? 1,
        duplicate_window: 120_000_000_000,
      };
      try {
        await jsm.streams.info(this.#stream);
      } catch {
        await jsm.streams.add(config).catch(async (e: unknown) => {
          // Made meanwhile by another host: fine when it is there now.
          await jsm.streams.info(this.#stream).catch(() => {
            throw e;
          });
        });
      }
      await jsm.consumers.add(this.#stream, {
        durable_name: 'tp',
        ack_policy: AckPolicy.Explicit,
        ack_wait: (this.#o.ackWait ?? 30_000) * 1_000_000,
        max_deliver: -1,
      });
      return { nc, js: jetstream(nc) };
    }
  }

  #check(): void {
    if (this.#closed) throw new mp.QueueClosedError(`cluster.Queue ${this.name} is closed in this process.`);
  }

  /** Adds `value`; resolves once the stream has it (retried with the same id until then). */
  async put(value: T, options: PutOptions = {}): Promise<void> {
    this.#check();
    const { js, nc } = await this.#ready;
    const data = encode(value);
    if (data.length > nc.info!.max_payload)
      throw new mp.InvalidArgumentError(
        `cluster.Queue ${this.name}: a value of ${data.length} bytes is over the server's max_payload (${nc.info!.max_payload}).`,
      );
    const msgID = options.id ?? randomUUID();
    let last: unknown;
    const until = performance.now() + PUT_RETRY_MS;
    for (let i = 0; ; i++) {
      try {
        await js.publish(this.#subject, data, { msgID, timeout: 2000 });
        return;
      } catch (e) {
        // A server lost mid-publish, an ack that timed out, no responder while the stream
        // elects a new leader: again, with the same id, after a pause that grows.
        last = e;
        if (this.#closed || performance.now() > until) break;
        await new Promise((r) => setTimeout(r, Math.min(1000, 50 * 2 ** i)));
      }
    }
    throw new mp.ClusterUnavailableError(
      `cluster.Queue ${this.name}: put() got no acknowledgement within ${PUT_RETRY_MS} ms: ${(last as Error)?.message}`,
      { cause: last },
    );
  }

  async #next(timeout: number | undefined): Promise<JsMsg> {
    this.#check();
    const { js } = await this.#ready;
    const until = timeout === undefined ? Infinity : performance.now() + timeout;
    for (let i = 0; ; i++) {
      const left = until - performance.now();
      if (left <= 0) throw new mp.QueueEmptyError(`cluster.Queue ${this.name}: nothing came within ${timeout} ms.`);
      let m: JsMsg | null = null;
      try {
        // Looked up inside the loop: while the stream elects a new leader (a server of three
        // lost) the lookup itself times out, and that is a pause, not an error of get().
        this.#consumer ??= await js.consumers.get(this.#stream, 'tp');
        m = await this.#consumer.next({ expires: Math.max(1000, Math.min(left, 5000)) });
      } catch (e) {
        if (this.#closed) throw new mp.QueueClosedError(`cluster.Queue ${this.name} was closed while get() waited.`);
        void e; // a server lost: the client reconnects, and the next pull goes to a survivor
        this.#consumer = null;
        await new Promise((r) => setTimeout(r, Math.min(1000, 50 * 2 ** i)));
      }
      if (m) return m;
      this.#check();
    }
  }

  /** Acknowledges `m`, again while the stream has no leader: an ack is idempotent, a lost one a duplicate. */
  async #ack(m: JsMsg): Promise<void> {
    const until = performance.now() + PUT_RETRY_MS;
    for (let i = 0; ; i++) {
      try {
        await m.ackAck({ timeout: 2000 });
        return;
      } catch (e) {
        if (this.#closed || performance.now() > until)
          throw new mp.ClusterUnavailableError(`cluster.Queue ${this.name}: the stream did not confirm an ack within ${PUT_RETRY_MS} ms.`, {
            cause: e,
          });
        await new Promise((r) => setTimeout(r, Math.min(1000, 50 * 2 ** i)));
      }
    }
  }

  /** Takes the next value (acknowledged before it is returned: it is then the caller's). */
  async get(options: GetOptions = {}): Promise<T> {
    const m = await this.#next(options.timeout);
    const value = decode(m.data) as T;
    await this.#ack(m);
    return value;
  }

  /** Takes the next value unacknowledged: lost with this process, it goes to another consumer after ackWait. */
  async getHeld(options: GetOptions = {}): Promise<Held<T>> {
    const m = await this.#next(options.timeout);
    return {
      value: decode(m.data) as T,
      deliveries: m.info.deliveryCount,
      ack: () => this.#ack(m),
      nak: () => m.nak(),
    };
  }

  /** Messages in the queue, not yet acknowledged. */
  async size(): Promise<number> {
    const { nc } = await this.#ready;
    const jsm = await jetstreamManager(nc);
    return (await jsm.streams.info(this.#stream)).state.messages;
  }

  /** Removes the queue from the cluster, for every host. */
  async destroy(): Promise<void> {
    const { nc } = await this.#ready;
    const jsm = await jetstreamManager(nc);
    await jsm.streams.delete(this.#stream);
  }

  /** Leaves the cluster in this process; the queue and its messages stay. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    const r = await this.#ready.catch(() => null);
    if (r) {
      await Promise.race([r.nc.flush().catch(() => {}), new Promise((res) => setTimeout(res, 1000).unref())]);
      await r.nc.close().catch(() => {});
    }
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }
}
