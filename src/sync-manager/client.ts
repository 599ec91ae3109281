// One process's line to a SyncManager (NOTE [Sync manager]): a Pipe of its own, whose far end it
// hands to the server once through the manager's request Queue, and the calls in flight on it.
// Replies are matched to calls by id; one recv() is pending per call in flight, so nothing waits
// on the pipe (and keeps the event loop alive) once every call is answered. The server's death
// is seen twice over: the pipe's end of file (once the server holds the far end) and a pidfd of
// the server process (a death before it took the far end would leave the pipe open for ever:
// the end is in the request Queue). Either rejects every call in flight, and every later call,
// with ManagerGoneError: a proxy never hangs.
import { addon, POLL_READABLE, type NativePoll } from '../native/index.js';
import {
  IndexOutOfRangeError,
  InvalidArgumentError,
  ManagerCallError,
  ManagerGoneError,
  NotHeldError,
  PipeClosedError,
  QueueEmptyError,
} from '../errors.js';
import { Pipe, type Connection, type Queue } from '../queue/index.js';
import type { Connect, Reply, Request } from './protocol.js';

/** Where a manager is: what a proxy carries to any process. */
export interface ManagerAddress {
  readonly requests: Queue<Connect>;
  readonly pid: number;
  /** Unique per manager: the key of this process's client for it. */
  readonly token: string;
}

const CODED: Record<string, new (m: string) => Error> = {
  ERR_TP_QUEUE_EMPTY: QueueEmptyError,
  ERR_TP_INDEX_OUT_OF_RANGE: IndexOutOfRangeError,
  ERR_TP_INVALID_ARGUMENT: InvalidArgumentError,
  ERR_TP_NOT_HELD: NotHeldError,
  ERR_TP_MANAGER_CALL: ManagerCallError,
};

interface Pending {
  resolve(v: unknown): void;
  reject(e: Error): void;
}

export class ManagerClient {
  readonly address: ManagerAddress;
  #conn: Connection<unknown> | null = null;
  #connecting: Promise<Connection<unknown>> | null = null;
  #watch: NativePoll | null = null;
  #pidfd = -1;
  #gone: ManagerGoneError | null = null;
  #next = 1;
  readonly #pending = new Map<number, Pending>();

  constructor(address: ManagerAddress) {
    this.address = address;
  }

  get gone(): boolean {
    return this.#gone !== null;
  }

  async call(object: number, method: string, args: unknown[]): Promise<unknown> {
    if (this.#gone !== null) throw this.#gone;
    const conn = this.#conn ?? (await (this.#connecting ??= this.#connect()));
    if (this.#gone !== null) throw this.#gone;
    const id = this.#next++;
    const reply = new Promise<unknown>((resolve, reject) => this.#pending.set(id, { resolve, reject }));
    const req: Request = [id, object, method, args];
    try {
      await conn.send(req);
    } catch (e) {
      this.#pending.delete(id);
      if (e instanceof PipeClosedError) throw this.#fail('its connection closed');
      throw e; // a value that cannot travel: the caller's error
    }
    conn.recv().then(
      (r) => this.#settle(r as Reply),
      (e) => this.#fail(e instanceof PipeClosedError ? 'it closed the connection' : String(e)),
    );
    return reply;
  }

  async #connect(): Promise<Connection<unknown>> {
    this.#watchServer();
    if (this.#gone !== null) throw this.#gone;
    const [mine, theirs] = Pipe();
    try {
      await this.address.requests.put({ connect: theirs, pid: process.pid });
    } finally {
      theirs.close(); // the server has its own copy now (or nobody does)
    }
    this.#conn = mine;
    return mine;
  }

  #watchServer(): void {
    try {
      this.#pidfd = addon.pidfdOpen(this.address.pid);
    } catch {
      this.#fail('its process is not running');
      return;
    }
    this.#watch = new addon.Poll(this.#pidfd, () => this.#fail('its process ended'));
    this.#watch.start(POLL_READABLE);
    this.#watch.unref(); // a manager's client does not keep a program running
  }

  #settle(r: Reply): void {
    const p = Array.isArray(r) ? this.#pending.get(r[0]) : undefined;
    if (p === undefined) return;
    this.#pending.delete(r[0]);
    if (r[1]) p.resolve(r[2]);
    else {
      const cls = r[3] === null ? undefined : CODED[r[3]];
      p.reject(cls === undefined ? new ManagerCallError(r[2]) : new cls(r[2]));
    }
  }

  #fail(why: string): ManagerGoneError {
    if (this.#gone === null) {
      this.#gone = new ManagerGoneError(
        `The manager (pid ${this.address.pid}) is gone: ${why}. Its objects went with it; start a new manager.`,
      );
      this.close();
    }
    const gone = this.#gone;
    for (const p of this.#pending.values()) p.reject(gone);
    this.#pending.clear();
    return gone;
  }

  /** Marks the manager gone (shut down) and lets go of the pipe and the watch. */
  markGone(why: string): void {
    this.#fail(why);
  }

  close(): void {
    this.#conn?.close();
    this.#conn = null;
    this.#watch?.close();
    this.#watch = null;
    if (this.#pidfd >= 0) addon.close(this.#pidfd);
    this.#pidfd = -1;
  }
}

const clients = new Map<string, ManagerClient>();

/** This process's client for the manager at `address` (one per manager; a gone one stays gone). */
export function clientFor(address: ManagerAddress): ManagerClient {
  let c = clients.get(address.token);
  if (c === undefined) {
    c = new ManagerClient(address);
    clients.set(address.token, c);
  }
  return c;
}
