// The frames an endpoint could not send yet, sent in order as its socket gets room.
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
import { closeOnce, dupAll, systemError } from '../native/index.js';
import { TooManyFilesError } from '../errors.js';
import { isMainThread } from 'node:worker_threads';
import { shedDescriptors } from '../sharing/index.js';
import type { Frame } from './wire.js';
import type { Watcher } from './watcher.js';

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

/** What a backlog sends through: its endpoint. */
export interface BacklogHost {
  readonly sendWatcher: Watcher;
  /** Sends now: false when the socket is full; throws when it cannot send at all. */
  sendNow(bytes: Uint8Array, fds: Int32Array): boolean;
  /** Told of each kept frame dropped unsent (a send error, or the thread's exit). */
  onDropped?: (() => void) | undefined;
  /** The backlog is empty again (sent, or dropped after a send error). */
  flushed(): void;
  /** The thread exits with frames unsent (see dropBacklogs below). */
  dropBacklog(): void;
  closeAtExit(): void;
}

export class SendBacklog {
  readonly #host: BacklogHost;
  #frames: KeptFrame[] = [];
  /** whenFlushed() calls waiting for the backlog to empty. */
  #flushWaiters: (() => void)[] = [];
  #joinCancelled = false;

  constructor(host: BacklogHost) {
    this.#host = host;
  }

  get empty(): boolean {
    return this.#frames.length === 0;
  }

  /** Keeps `frame` (a copy) to send after those before it. */
  push(frame: Frame): void {
    const kept = keepFrame(frame);
    this.#frames.push(kept);
    if (this.#frames.length > 1) return;
    try {
      this.#host.sendWatcher.onWritable(this.#flush);
    } catch (e) {
      // No watcher, no flush: the frame must not stay behind (its caller abandons it).
      this.#frames.pop();
      kept.dispose();
      throw e;
    }
    backlogged.add(this.#host);
  }

  readonly #flush = (): void => {
    while (this.#frames.length > 0) {
      const k = this.#frames[0]!;
      let sent: boolean;
      try {
        sent = this.#host.sendNow(k.bytes, k.fds);
      } catch (e) {
        // The caller's put() resolved long ago: all that is left is to let go of the backlog.
        process.emitWarning(
          `tensorproc: ${this.#frames.length} queued message(s) were dropped: ${(e as Error).message}`,
          'TensorprocWarning',
        );
        for (const dropped of this.#frames.splice(0)) this.#drop(dropped, true);
        break;
      }
      if (!sent) return;
      this.#frames.shift();
      this.#drop(k, false);
    }
    backlogged.delete(this.#host);
    this.#host.sendWatcher.onWritable(null);
    this.#settleFlushed();
    this.#host.flushed();
  };

  /**
   * Resolves once every frame kept has gone into the socket, or was dropped (a send error,
   * the process's exit): at once when nothing is kept, or after cancelJoin().
   */
  whenFlushed(): Promise<void> {
    if (this.#frames.length === 0 || this.#joinCancelled) return Promise.resolve();
    return new Promise((resolve) => this.#flushWaiters.push(resolve));
  }

  /** The backlog no longer keeps this process alive; `watching`: its watcher is still open. */
  cancelJoin(watching: boolean): void {
    if (this.#joinCancelled) return;
    this.#joinCancelled = true;
    if (watching) this.#host.sendWatcher.setWritableKeepsAlive(false);
    this.#settleFlushed();
  }

  /** Lets go of every frame not sent yet: each is abandoned, and onDropped is told. */
  dropAll(): void {
    backlogged.delete(this.#host);
    for (const k of this.#frames.splice(0)) this.#drop(k, true);
    this.#settleFlushed();
  }

  /** The endpoint closed its descriptors: nothing here can be sent any more. */
  forget(): void {
    backlogged.delete(this.#host);
  }

  #settleFlushed(): void {
    for (const resolve of this.#flushWaiters.splice(0)) resolve();
  }

  #drop(k: KeptFrame, abandon: boolean): void {
    k.dispose();
    if (!abandon) return;
    k.abandon();
    this.#host.onDropped?.();
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
const backlogged = new Set<BacklogHost>();
process.prependListener('exit', dropBacklogs);

/** Gives back every frame not sent yet, in every endpoint of this thread. */
function dropBacklogs(): void {
  for (const host of backlogged) {
    if (isMainThread) host.dropBacklog();
    else host.closeAtExit();
  }
}
