// One side of a socket channel: sends frames in order and receives messages, from the event
// loop, for the queue layer (a Queue, SimpleQueue or Pipe end owns one Endpoint).
// The frames it could not send yet wait in its SendBacklog (NOTE [Sending without blocking],
// send-backlog.ts); receivers take exactly one datagram per get(), through its DatagramReader
// (datagram-reader.ts), which meets what a recvmsg may meet.
import { addon, EAGAIN, POLL_DISCONNECT, POLL_READABLE, systemError } from '../native/index.js';
import { PipeClosedError, QueueClosedError } from '../errors.js';
import { encodeMessage, type Frame } from './frame.js';
import { DatagramReader, READ_END, READ_NOTHING } from './datagram-reader.js';
import { Watcher } from './watcher.js';
import { settled } from '../event-loop.js';
import { SendBacklog } from './send-backlog.js';
import { timedOut } from './timeouts.js';
import { transportAddon } from './native.js';

export const NOTHING: unique symbol = Symbol('nothing');

interface Waiter {
  resolve(value: unknown): void;
  reject(error: unknown): void;
  timer: NodeJS.Timeout | null;
}

/** A poll(): settles when a message is waiting (true), or after its timeout (false). */
interface PollWaiter {
  resolve(ready: boolean): void;
  reject(error: unknown): void;
  timer: NodeJS.Timeout | null;
}

export interface EndpointOptions {
  /** Called each time a datagram is taken off the socket, before it is decoded. */
  onDatagram?: () => void;
  /** Called for each kept frame that is dropped unsent (a send error, or a thread's exit). */
  onDropped?: () => void;
  /** What a closed endpoint is called in errors: 'queue' or 'pipe end'. */
  what: string;
}

export class Endpoint {
  readonly sendFd: number;
  readonly recvFd: number;
  readonly sendWatcher: Watcher;
  readonly recvWatcher: Watcher;
  readonly #options: EndpointOptions;
  #waiters: Waiter[] = [];
  #polls = new Set<PollWaiter>();
  /** The owner, weakly (a strong reference would keep it from ever being collected), and
   * the same owner held strongly while something waits (see pin()). */
  #owner: WeakRef<object> | null = null;
  #pins = 0;
  #pinned: object | null = null;
  readonly #backlog: SendBacklog;
  #closed = false;
  #fdsClosed = false;
  #ended = false;
  readonly #reader: DatagramReader;

  constructor(sendFd: number, recvFd: number, options: EndpointOptions) {
    this.sendFd = sendFd;
    this.recvFd = recvFd;
    this.sendWatcher = new Watcher(sendFd);
    this.recvWatcher = sendFd === recvFd ? this.sendWatcher : new Watcher(recvFd);
    this.#options = options;
    this.#reader = new DatagramReader(recvFd, options.what, options.onDatagram);
    this.#backlog = new SendBacklog({
      sendWatcher: this.sendWatcher,
      sendNow: (bytes, fds) => this.#sendNow(bytes, fds),
      onDropped: options.onDropped,
      flushed: () => {
        if (this.#closed) this.#closeFds();
      },
      dropBacklog: () => this.dropBacklog(),
      closeAtExit: () => this.closeAtExit(),
    });
  }

  get closed(): boolean {
    return this.#closed;
  }

  closedError(): QueueClosedError {
    return new QueueClosedError(`This ${this.#options.what} was closed in this process; it cannot be used here any more.`);
  }

  // NOTE [Waiting keeps the owner alive]
  // A Queue (SimpleQueue, Connection) dropped by its user is closed by the garbage collector
  // (NOTE [Queue objects and descriptors]). But a get, put or poll that waits may be the only
  // thing left that leads to it (`q.get().then(...)` with q gone): the waiting endpoint is
  // reachable from its native poll, its owner is not, and collecting the owner would close
  // the queue under the wait. So while anything waits, the endpoint holds its owner.

  /** The object whose collection closes this endpoint (set once by it). */
  setOwner(owner: object): void {
    this.#owner = new WeakRef(owner);
  }

  /** One more (+1) or one less (-1) wait in progress on this endpoint or its slots. */
  pin(delta: 1 | -1): void {
    this.#pins += delta;
    if (this.#pins <= 0) this.#pinned = null;
    else if (this.#pinned === null) this.#pinned = this.#owner?.deref() ?? null;
  }

  // --- sending ------------------------------------------------------------------------

  /** Sends a frame now, or keeps it to send in order (NOTE [Sending without blocking]). */
  send(frame: Frame): void {
    if (this.#closed) throw this.closedError();
    if (this.#backlog.empty && this.#sendNow(frame.bytes, frame.fds)) return;
    this.#backlog.push(frame);
  }

  /**
   * Encodes `value` and sends it; a value that cannot be sent leaves nothing behind (its
   * storages' in-flight references are given back). Returns a promise, as put/send do.
   */
  sendValue(value: unknown): Promise<void> {
    try {
      this.sendEncoded(this.encode(value));
    } catch (e) {
      return Promise.reject(e);
    }
    return settled(undefined); // NOTE [Letting the loop turn]
  }

  /** The frame of `value`, to send with sendEncoded() before anything else is encoded. */
  encode(value: unknown): Frame {
    if (this.#closed) throw this.closedError();
    return encodeMessage(value);
  }

  /** Sends a frame from encode(); one that cannot be sent is abandoned (nothing left behind). */
  sendEncoded(frame: Frame): void {
    try {
      this.send(frame);
    } catch (e) {
      frame.abandon();
      throw e;
    }
  }

  #sendNow(bytes: Uint8Array, fds: Int32Array): boolean {
    let n: number;
    try {
      n = addon.send(this.sendFd, bytes, fds);
    } catch (e) {
      const code = (e as { code?: string }).code;
      if (code === 'EPIPE' || code === 'ECONNRESET') {
        throw new PipeClosedError(`Nothing can receive from this ${this.#options.what} any more: every receiving end was closed.`);
      }
      throw systemError(e, `sending on a ${this.#options.what}`);
    }
    return n !== EAGAIN;
  }

  /** torch's join_thread(): resolves once the backlog has gone out (NOTE [Sending without blocking]). */
  whenFlushed(): Promise<void> {
    return this.#backlog.whenFlushed();
  }

  /** torch's cancel_join_thread(): the backlog no longer keeps this process alive. */
  cancelJoin(): void {
    this.#backlog.cancelJoin(!this.#fdsClosed);
  }

  // --- receiving ----------------------------------------------------------------------

  /**
   * One message if one is waiting, else NOTHING. Throws PipeClosedError at end of stream,
   * and the decoding error of a message that was taken but could not be decoded.
   */
  receiveNow(): unknown {
    if (this.#closed) throw this.closedError();
    if (this.#ended) throw this.#endError();
    const n = this.#reader.read();
    if (n === READ_NOTHING) return NOTHING;
    if (n === READ_END) {
      this.#ended = true;
      throw this.#endError();
    }
    return this.#reader.decode(n);
  }

  #endError(): PipeClosedError {
    return new PipeClosedError(`Nothing more can arrive on this ${this.#options.what}: every sending end was closed.`);
  }

  /**
   * The next message, or a rejection with `onTimeout(timeout)` once `timeout` ms pass (null:
   * no limit, and then onTimeout is never called). A function, not an error, so that a get
   * makes no Error, and no closure, unless it times out.
   */
  receive(timeout: number | null, onTimeout?: (timeout: number) => Error): Promise<unknown> {
    if (this.#closed) return Promise.reject(this.closedError());
    if (this.#waiters.length === 0) {
      try {
        const v = this.receiveNow();
        if (v !== NOTHING) return settled(v); // NOTE [Letting the loop turn]
      } catch (e) {
        return Promise.reject(e);
      }
      if (timeout === 0) return Promise.reject(timedOut(0, onTimeout));
    }
    return new Promise((resolve, reject) => {
      const w: Waiter = { resolve, reject, timer: null };
      if (timeout !== null) {
        w.timer = setTimeout(() => {
          const i = this.#waiters.indexOf(w);
          if (i < 0) return;
          this.#waiters.splice(i, 1);
          this.pin(-1);
          this.#updateReadable();
          reject(timedOut(timeout, onTimeout));
        }, timeout);
      }
      this.#waiters.push(w);
      this.pin(1);
      this.#updateReadable();
    });
  }

  /** Whether a receive of this process waits already (a new one queues behind it). */
  get receiving(): boolean {
    return this.#waiters.length > 0;
  }

  /** Watches for readability while a receive or a poll waits. */
  #updateReadable(): void {
    this.recvWatcher.onReadable(this.#waiters.length > 0 || this.#polls.size > 0 ? this.#onReadable : null);
  }

  readonly #onReadable = (): void => {
    // Polls first: they take nothing, and a message about to be received was there.
    for (const p of this.#polls) this.#settlePoll(p, true);
    this.#serve();
    this.#updateReadable();
  };

  #settlePoll(p: PollWaiter, ready: boolean | Error): void {
    if (!this.#polls.delete(p)) return;
    if (p.timer !== null) clearTimeout(p.timer);
    this.pin(-1);
    if (ready instanceof Error) p.reject(ready);
    else p.resolve(ready);
  }

  #serve(): void {
    while (this.#waiters.length > 0) {
      let v: unknown;
      let failed = false;
      try {
        v = this.receiveNow();
        if (v === NOTHING) return;
      } catch (e) {
        v = e;
        failed = true;
      }
      const w = this.#waiters.shift()!;
      if (w.timer !== null) clearTimeout(w.timer);
      this.pin(-1);
      if (failed) w.reject(v);
      else w.resolve(v);
      if (this.#ended) {
        for (const rest of this.#waiters.splice(0)) {
          if (rest.timer !== null) clearTimeout(rest.timer);
          this.pin(-1);
          rest.reject(this.#endError());
        }
      }
    }
  }

  /** True when a message is waiting (or the stream ended), without taking it. */
  ready(): boolean {
    if (this.#closed) throw this.closedError();
    return this.#ended || (transportAddon.pollNow(this.recvFd, POLL_READABLE) & (POLL_READABLE | POLL_DISCONNECT)) !== 0;
  }

  /**
   * Resolves true once a message is waiting (or the stream ended), false after `timeout` ms
   * (null: no limit); rejects with QueueClosedError if this end is closed meanwhile. Any
   * number of polls and receives may wait at once: a message that arrives settles every
   * poll, and the first receive takes it.
   */
  whenReady(timeout: number | null): Promise<boolean> {
    if (this.ready()) return Promise.resolve(true);
    if (timeout === 0) return Promise.resolve(false);
    return new Promise((resolve, reject) => {
      const p: PollWaiter = { resolve, reject, timer: null };
      if (timeout !== null)
        p.timer = setTimeout(() => {
          this.#settlePoll(p, false);
          this.#updateReadable();
        }, timeout);
      this.#polls.add(p);
      this.pin(1);
      this.#updateReadable();
    });
  }

  /**
   * mp.wait(): calls `onReady` when a message is waiting (or the stream ended), or when this
   * end is closed; until the function returned is called, which stops watching. Takes nothing.
   */
  watchReady(onReady: () => void): () => void {
    const p: PollWaiter = { resolve: onReady, reject: onReady, timer: null };
    this.#polls.add(p);
    this.pin(1);
    this.#updateReadable();
    return () => {
      if (!this.#polls.delete(p)) return; // settled already
      this.pin(-1);
      if (!this.#closed) this.#updateReadable();
    };
  }

  // --- closing ------------------------------------------------------------------------

  /**
   * Closes this process's use of the channel: waiting receives reject with
   * QueueClosedError; frames still in the backlog are sent first, then the descriptors are
   * closed (NOTE [Sending without blocking]).
   */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    for (const w of this.#waiters.splice(0)) {
      if (w.timer !== null) clearTimeout(w.timer);
      this.pin(-1);
      w.reject(this.closedError());
    }
    for (const p of this.#polls) this.#settlePoll(p, this.closedError());
    this.recvWatcher.onReadable(null);
    if (this.#backlog.empty) this.#closeFds();
  }

  /**
   * close(), without waiting for the backlog: for a worker thread that exits, whose event
   * loop will never flush it. What it held is given back (the messages are lost, as they
   * would be with the thread), and the descriptors are closed: threads share the process's
   * descriptor table, so nothing else would close them.
   */
  closeAtExit(): void {
    this.close();
    this.dropBacklog();
    this.#closeFds();
  }

  /** Lets go of every frame not sent yet: each is abandoned, and onDropped is told. */
  dropBacklog(): void {
    this.#backlog.dropAll();
  }

  #closeFds(): void {
    if (this.#fdsClosed) return;
    this.#fdsClosed = true;
    this.#backlog.forget();
    this.sendWatcher.close();
    this.recvWatcher.close();
    addon.close(this.sendFd);
    if (this.recvFd !== this.sendFd) addon.close(this.recvFd);
  }
}
