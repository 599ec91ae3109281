// One side of a socket channel: sends frames in order and receives messages, from the event
// loop, for the queue layer (a Queue, SimpleQueue or Pipe end owns one Endpoint).
//
// NOTE [Sending without blocking]
// send() puts the datagram in the kernel's socket buffer at once when there is room: the
// usual case, and then nothing is kept. When the buffer is full, the frame waits in this
// endpoint's backlog (its bytes copied, its descriptors duplicated, so that nothing the user
// releases meanwhile can invalidate it) and is sent, in order, as soon as the socket has
// room; later frames queue behind it. The caller is not made to wait, as with torch's queue
// feeder thread, so that a process may put and then get on one queue. Like torch's feeder,
// a backlog keeps the process alive until it is flushed (a ref'd writable poll), so a
// producer that returns right after its last put still delivers it.
// A process that must not wait for that (its consumers may be gone) calls cancelJoin()
// (torch's cancel_join_thread()): the backlog then no longer keeps it alive, and what is
// still in it when the process exits is given back unsent. whenFlushed() is torch's
// join_thread(): it resolves once the backlog is empty.
// Receivers take exactly one datagram per get(): a process never reads ahead, so a consumer
// that stops (or is killed) leaves every message it did not take to the others.
import { addon, closeOnce, dupAll, EAGAIN, EMSGSIZE, POLL_DISCONNECT, POLL_READABLE, RECV_EMPTY, RECV_NO_PROBE, systemError } from '../native/index.js';
import { FrameDecodeError, InvalidArgumentError, PipeClosedError, QueueClosedError, TooManyFilesError, describeValue } from '../errors.js';
import { decodeReceived, encodeMessage, MAX_FDS, MAX_FRAME, type Frame } from './frame.js';
import { Watcher } from './watcher.js';
import { settled } from './turns.js';
import { isMainThread } from 'node:worker_threads';
import { transportAddon } from './native.js';
import { ensureReserve, giveReserve, hasMappingRoom, mappingsError, shedDescriptors, takeReserve } from '../sharing/index.js';

export const NOTHING: unique symbol = Symbol('nothing');

/** Datagrams in a row without descriptors after which an endpoint stops probing (NOTE [Receive reserve]). */
const PROBE_AFTER = 1024;

// One receive buffer per thread: a message is decoded before the next one is read.
const recvBuffer = new Uint8Array(MAX_FRAME);
const fdsOut = new Int32Array(MAX_FDS + 1);

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

/** A frame that stays valid while it waits: its own bytes, its own descriptors. */
export interface KeptFrame extends Frame {
  /** Closes the duplicated descriptors (after sending, or before abandoning). */
  dispose(): void;
}

/** Copies a frame's bytes and duplicates its descriptors (NOTE [Sending without blocking]). */
export function keepFrame(frame: Frame): KeptFrame {
  let fds: number[];
  try {
    fds = dupAll(frame.fds);
  } catch (e) {
    const err = systemError(e, 'keeping a message until it can be sent');
    // Out of descriptors: what is kept for reuse only goes first (NOTE [Kept descriptors]).
    if (!(err instanceof TooManyFilesError) || shedDescriptors() === 0) throw err;
    try {
      fds = dupAll(frame.fds);
    } catch (e2) {
      throw systemError(e2, 'keeping a message until it can be sent');
    }
  }
  return { bytes: frame.bytes.slice(), fds: Int32Array.from(fds), abandon: frame.abandon, dispose: closeOnce(fds) };
}

export interface EndpointOptions {
  /** Called each time a datagram is taken off the socket, before it is decoded. */
  onDatagram?: () => void;
  /** Called for each kept frame that is dropped unsent (a send error, or a thread's exit). */
  onDropped?: () => void;
  /** What a closed endpoint is called in errors: 'queue' or 'pipe end'. */
  what: string;
}

/** Milliseconds from a user's `timeout` option: undefined/null/Infinity mean none. */
/** The timeout of an options object (`{ timeout }`), which must be an object if given. */
export function timeoutOption(options: unknown): number | null {
  if (options === undefined || options === null) return null;
  if (typeof options !== 'object') {
    throw new InvalidArgumentError(`options must be an object such as { timeout: 1000 } (got ${describeValue(options)}).`);
  }
  let timeout: unknown;
  try {
    timeout = (options as { timeout?: unknown }).timeout;
  } catch (e) {
    // A revoked Proxy (or a throwing getter): the caller's error, named as such.
    throw new InvalidArgumentError(`options could not be read (${(e as Error)?.message ?? String(e)}): pass a plain object such as { timeout: 1000 }.`, { cause: e });
  }
  return checkTimeout(timeout);
}

export function checkTimeout(timeout: unknown): number | null {
  if (timeout === undefined || timeout === null || timeout === Infinity) return null;
  if (typeof timeout !== 'number' || !(timeout >= 0)) {
    throw new InvalidArgumentError(`timeout must be a number of milliseconds >= 0, or undefined for none (got ${describeValue(timeout)}).`);
  }
  // setTimeout cannot wait longer than this; that long is "no timeout" in practice.
  return timeout > 2 ** 31 - 1 ? null : timeout;
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
  #backlog: KeptFrame[] = [];
  /** whenFlushed() calls waiting for the backlog to empty. */
  #flushWaiters: (() => void)[] = [];
  #joinCancelled = false;
  #closed = false;
  #fdsClosed = false;
  #ended = false;
  /** Datagrams received in a row without descriptors (NOTE [Receive reserve]). */
  #fdLess = 0;

  constructor(sendFd: number, recvFd: number, options: EndpointOptions) {
    this.sendFd = sendFd;
    this.recvFd = recvFd;
    this.sendWatcher = new Watcher(sendFd);
    this.recvWatcher = sendFd === recvFd ? this.sendWatcher : new Watcher(recvFd);
    this.#options = options;
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
    if (this.#backlog.length === 0 && this.#sendNow(frame.bytes, frame.fds)) return;
    const kept = keepFrame(frame);
    this.#backlog.push(kept);
    if (this.#backlog.length === 1) {
      try {
        this.sendWatcher.onWritable(this.#flush);
      } catch (e) {
        // No watcher, no flush: the frame must not stay behind (its caller abandons it).
        this.#backlog.pop();
        kept.dispose();
        throw e;
      }
      backlogged.add(this);
    }
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

  readonly #flush = (): void => {
    while (this.#backlog.length > 0) {
      const k = this.#backlog[0]!;
      let sent: boolean;
      try {
        sent = this.#sendNow(k.bytes, k.fds);
      } catch (e) {
        // The caller's put() resolved long ago: all that is left is to let go of the backlog.
        process.emitWarning(`tensorproc: ${this.#backlog.length} queued message(s) were dropped: ${(e as Error).message}`, 'TensorprocWarning');
        for (const dropped of this.#backlog.splice(0)) this.#drop(dropped, true);
        break;
      }
      if (!sent) return;
      this.#backlog.shift();
      this.#drop(k, false);
    }
    backlogged.delete(this);
    this.sendWatcher.onWritable(null);
    this.#settleFlushed();
    if (this.#closed) this.#closeFds();
  };

  /**
   * Resolves once every frame kept in the backlog has gone into the socket, or was dropped
   * (a send error, the process's exit): at once when nothing is kept, or after cancelJoin().
   */
  whenFlushed(): Promise<void> {
    if (this.#backlog.length === 0 || this.#joinCancelled) return Promise.resolve();
    return new Promise((resolve) => this.#flushWaiters.push(resolve));
  }

  /** The backlog no longer keeps this process alive (NOTE [Sending without blocking]). */
  cancelJoin(): void {
    if (this.#joinCancelled) return;
    this.#joinCancelled = true;
    if (!this.#fdsClosed) this.sendWatcher.setWritableKeepsAlive(false);
    this.#settleFlushed();
  }

  #settleFlushed(): void {
    for (const resolve of this.#flushWaiters.splice(0)) resolve();
  }

  #drop(k: KeptFrame, abandon: boolean): void {
    k.dispose();
    if (!abandon) return;
    k.abandon();
    this.#options.onDropped?.();
  }

  // --- receiving ----------------------------------------------------------------------

  /**
   * One message if one is waiting, else NOTHING. Throws PipeClosedError at end of stream,
   * and the decoding error of a message that was taken but could not be decoded.
   */
  receiveNow(): unknown {
    if (this.#closed) throw this.closedError();
    if (this.#ended) throw this.#endError();
    // NOTE [Mapping budget]: refused before anything is taken, the message waits for a later receive.
    if (!hasMappingRoom()) throw mappingsError(`Receiving on a ${this.#options.what} (nothing was taken)`);
    let n: number;
    try {
      n = this.#recv();
    } catch (e) {
      // Out of descriptors before anything was taken: what tensorproc keeps for reuse only
      // goes first (NOTE [Kept descriptors]), then one more try.
      if (!isProbeFailure(e) || shedDescriptors() === 0) throw this.#receiveError(e);
      try {
        n = this.#recv();
      } catch (e2) {
        throw this.#receiveError(e2);
      }
    }
    if (n === EAGAIN) return NOTHING;
    if (n === RECV_EMPTY) {
      // No tensorproc process sends one, so it took no slot: some other process writes to
      // this socket. Dropped; the queue goes on (only the end of the stream ends it).
      throw new FrameDecodeError(`A zero-length datagram arrived on this ${this.#options.what} (it was dropped): it was not sent by tensorproc.`);
    }
    if (n < 0) {
      this.#ended = true;
      throw this.#endError();
    }
    this.#options.onDatagram?.();
    return decodeReceived(recvBuffer.subarray(0, n), fdsOut);
  }

  #receiveError(e: unknown): Error {
    const err = e as { errno?: number; code?: string; syscall?: string };
    if (err.errno === EMSGSIZE) {
      // Larger than any frame tensorproc sends (NOTE [Frames]): it took no slot either.
      return new FrameDecodeError(`A message larger than ${MAX_FRAME} bytes arrived (it was dropped): it was not sent by tensorproc.`);
    }
    if (err.code === 'EMFILE' || err.code === 'ENFILE') {
      // NOTE [Receiving descriptors] (channel.cc): the probe failed before anything was taken,
      // or (a message with more descriptors than slots were free) the kernel dropped them.
      const taken = err.syscall === 'recvmsg';
      if (taken) {
        this.#options.onDatagram?.();
        this.#fdLess = 0; // descriptors arrive here after all: probe again
      }
      return new TooManyFilesError(
        `Receiving on a ${this.#options.what}: the open-file limit is reached (${err.code}), so a message that carries descriptors cannot be received. ` +
          (taken
            ? 'A message with more descriptors than this process had room for arrived, and was lost. '
            : 'Nothing was taken: the message waits for a later receive. ') +
          'Close descriptors (files, sockets, tensors you hold), raise the limit (ulimit -n), or use setSharingStrategy(\'file_system\'), whose messages carry none.',
        err,
      );
    }
    return systemError(e, `receiving on a ${this.#options.what}`);
  }

  /**
   * One recvmsg. A peer that closed its end with messages of ours unread leaves ECONNRESET
   * pending on this end, reported once, by the next call, ahead of messages still waiting
   * here: that report is taken, and the call made again (it then returns a message, or the
   * end of the stream).
   */
  #recv(): number {
    try {
      // NOTE [Receive reserve]: a slot is made sure of while datagrams here carry descriptors.
      const reserve = this.#fdLess < PROBE_AFTER ? takeReserve() : RECV_NO_PROBE;
      const n = addon.recv(this.recvFd, recvBuffer, fdsOut, reserve);
      if (n === EAGAIN) {
        if (reserve >= 0) giveReserve(fdsOut[0]!);
      } else if (n >= 0) {
        if (fdsOut[0]! > 0) this.#fdLess = 0;
        else if (++this.#fdLess === PROBE_AFTER) ensureReserve();
      }
      return n;
    } catch (e) {
      if ((e as { code?: string }).code !== 'ECONNRESET') throw e;
      return addon.recv(this.recvFd, recvBuffer, fdsOut);
    }
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
      if (timeout !== null) p.timer = setTimeout(() => {
        this.#settlePoll(p, false);
        this.#updateReadable();
      }, timeout);
      this.#polls.add(p);
      this.pin(1);
      this.#updateReadable();
    });
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
    if (this.#backlog.length === 0) this.#closeFds();
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
    backlogged.delete(this);
    for (const k of this.#backlog.splice(0)) this.#drop(k, true);
    this.#settleFlushed();
  }

  #closeFds(): void {
    if (this.#fdsClosed) return;
    this.#fdsClosed = true;
    backlogged.delete(this);
    this.sendWatcher.close();
    this.recvWatcher.close();
    addon.close(this.sendFd);
    if (this.recvFd !== this.sendFd) addon.close(this.recvFd);
  }
}

// Endpoints with frames not sent yet. A process or thread that exits with some (process.exit()
// with a backlog, which otherwise keeps it alive until it is sent) gives them back: a bounded
// queue's slots are freed (onDropped), and references in flight abandoned. A worker thread
// also closes the descriptors, which its process keeps (NOTE [Queue objects and descriptors]).
// A kill runs no hook: that loses what the backlog held, and a bounded queue keeps their
// slots (as torch's semaphore does), for SIGTERM too. Not handled here: a signal handled in
// JavaScript waits for the event loop, so a child busy in a synchronous loop would no longer
// die of it at once. A thread child gives them back (NOTE [Stopping a thread child]).
// First of the exit hooks: the references given back are dropped through segment headers
// that the allocator's own exit hook unmaps (allocator.ts), and a creator waiting for its
// segment is woken through them.
const backlogged = new Set<Endpoint>();
process.prependListener('exit', dropBacklogs);

/** Gives back every frame not sent yet, in every endpoint of this thread. */
function dropBacklogs(): void {
  for (const e of backlogged) {
    if (isMainThread) e.dropBacklog();
    else e.closeAtExit();
  }
}

/** recv's slot probe found the descriptor table full: nothing was taken (NOTE [Receiving descriptors]). */
function isProbeFailure(e: unknown): boolean {
  const err = e as { code?: string; syscall?: string };
  return (err.code === 'EMFILE' || err.code === 'ENFILE') && err.syscall !== 'recvmsg';
}

function timedOut(timeout: number, onTimeout: ((timeout: number) => Error) | undefined): Error {
  return onTimeout?.(timeout) ?? new Error(`Nothing arrived within ${timeout} ms.`);
}
