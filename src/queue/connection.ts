// Pipe(): torch.multiprocessing.Pipe, two connected ends. Each end is one descriptor of a
// SEQPACKET socketpair, used both ways (NOTE [Frames] for what travels). Meant, as in torch,
// for one process at each end at a time; several readers of one end would each take whole
// messages, never parts.
import { addon, systemError } from '../native/index.js';
import { InvalidArgumentError } from '../errors.js';
import { describeValue } from '../describe-value.js';
import { Endpoint, checkTimeout, registerReduction } from '../transport/index.js';
import { registerWaitable } from './waitable.js';
import { checkState, remember, keyOrClose, reuseOrAdopt, track, untrack } from './lifetime.js';
import { checkArgCount, extraArgumentsError } from '../arguments.js';
import { claimName, releaseName, type NameClaim } from '../transport/names/index.js';

const READABLE = 1;
const WRITABLE = 2;

let adopting: { endpoint: Endpoint; mode: number; key: string | null } | null = null;

export class Connection<T = unknown> {
  readonly #endpoint: Endpoint;
  readonly #mode: number;

  /** Made by Pipe() (or when an end arrives in a message); not constructed directly. */
  constructor() {
    if (adopting === null) throw new InvalidArgumentError('Connections are made by mp.Pipe(), not with new.');
    const { endpoint, mode, key } = adopting;
    adopting = null;
    this.#endpoint = endpoint;
    this.#mode = mode;
    const identity = key ?? keyOrClose(endpoint);
    track(this, endpoint);
    endpoint.setOwner(this); // NOTE [Waiting keeps the owner alive]
    remember(identity, this);
  }

  /** @internal `key`: the socket's identity when the caller has it already. */
  static adopt(fd: number, mode: number, key: string | null = null): Connection {
    adopting = { endpoint: new Endpoint(fd, fd, { what: 'pipe end' }), mode, key };
    return new Connection();
  }

  get readable(): boolean {
    return (this.#mode & READABLE) !== 0;
  }
  get writable(): boolean {
    return (this.#mode & WRITABLE) !== 0;
  }

  /** Sends `obj` to the other end; resolves once it is on its way. */
  send(obj: T): Promise<void> {
    const extra = extraArgumentsError('Connection.send()', arguments, 1);
    if (extra !== null) return Promise.reject(extra);
    if (!this.writable) return Promise.reject(new InvalidArgumentError('This end of a one-way Pipe only receives: send on the other end.'));
    return this.#endpoint.sendValue(obj);
  }

  /** The next message from the other end; PipeClosedError once the other end is closed everywhere. */
  recv(): Promise<T> {
    const extra = extraArgumentsError('Connection.recv()', arguments, 0);
    if (extra !== null) return Promise.reject(extra);
    if (!this.readable) return Promise.reject(new InvalidArgumentError('This end of a one-way Pipe only sends: recv on the other end.'));
    return this.#endpoint.receive(null) as Promise<T>;
  }

  /** Whether a message can be received now, waiting up to `timeout` ms (default 0; null: forever). */
  poll(timeout: number | null = 0): Promise<boolean> {
    const extra = extraArgumentsError('Connection.poll()', arguments, 1);
    if (extra !== null) return Promise.reject(extra);
    try {
      if (!this.readable) throw new InvalidArgumentError('This end of a one-way Pipe only sends: poll the other end.');
      return this.#endpoint.whenReady(checkTimeout(timeout));
    } catch (e) {
      return Promise.reject(e);
    }
  }

  close(): void {
    checkArgCount('Connection.close()', arguments, 0);
    releaseName(this); // NOTE [Named objects]: the listening end's close() gives the name up
    untrack(this.#endpoint);
    this.#endpoint.close();
  }

  get closed(): boolean {
    return this.#endpoint.closed;
  }

  static {
    registerWaitable(Connection, (c) => c.#endpoint);
    registerReduction<Connection>({
      name: 'connection',
      type: Connection,
      reduce(c, ctx) {
        const e = c.#endpoint;
        if (e.closed) throw e.closedError();
        return [ctx.fd(e.sendFd), c.#mode];
      },
      rebuild(state, ctx) {
        const [i, mode] = checkState(state, 2, 'pipe end');
        const fd = ctx.takeFd(i);
        return reuseOrAdopt<Connection>(
          [fd],
          0,
          (x) => !x.closed,
          (key) => Connection.adopt(fd, mode! & (READABLE | WRITABLE), key),
        );
      },
    });
  }
}

export interface PipeOptions {
  /** As Pipe(duplex): false makes the first end receive only, the second send only. */
  duplex?: boolean;
  /**
   * Reachable by this name from any process of this user (NOTE [Named objects]): the first
   * end is the listening end, kept here, and `mp.attach(name)` returns the second end there.
   */
  name?: string;
}

/**
 * torch Pipe(duplex): two connected ends. duplex (default): both ends send and receive;
 * false: the first end only receives, the second only sends. With `{ name }`, the second end
 * is what mp.attach(name) returns in another process; closing the first gives the name up.
 */
export function Pipe<T = unknown>(options: boolean | PipeOptions = true): [Connection<T>, Connection<T>] {
  let duplex: unknown = options;
  let claim: NameClaim | null = null;
  if (options !== null && typeof options === 'object') {
    try {
      duplex = options.duplex ?? true;
    } catch (e) {
      throw new InvalidArgumentError(`Pipe() could not read its options (${(e as Error)?.message ?? String(e)}).`, { cause: e });
    }
  }
  if (typeof duplex !== 'boolean')
    throw new InvalidArgumentError(`Pipe() takes true or false, or { duplex, name } (got ${describeValue(options)}).`);
  claim = claimName(options, 'Pipe()');
  let fds: [number, number];
  try {
    fds = addon.socketpair();
  } catch (e) {
    claim?.close();
    throw systemError(e, 'creating a pipe');
  }
  const both = READABLE | WRITABLE;
  let a: Connection<T>;
  try {
    a = Connection.adopt(fds[0], duplex ? both : READABLE) as Connection<T>;
  } catch (e) {
    addon.close(fds[1]); // the first end closed its own descriptor
    claim?.close();
    throw e;
  }
  let b: Connection<T>;
  try {
    b = Connection.adopt(fds[1], duplex ? both : WRITABLE) as Connection<T>;
  } catch (e) {
    a.close();
    claim?.close();
    throw e;
  }
  claim?.serve(a, b);
  return [a, b];
}
