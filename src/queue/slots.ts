// Exact `maxsize` backpressure across processes.
//
// NOTE [Queue slots]
// A bounded queue keeps two words in its shared state (shared-words.ts): COUNT, the
// messages put and not yet taken, and WAITERS, the puts waiting for a free slot in all
// processes. A put takes a slot with a compare-and-swap (COUNT < maxsize) before it sends; a
// get gives one back as soon as it has taken a datagram off the socket. Nothing ever waits
// on a lock, so a process killed at any point cannot block the others; the worst a kill can
// do is lose one slot (a producer killed between taking its slot and sending, or a consumer
// between receiving and giving it back: a window of a few instructions).
// A put that finds the queue full counts itself in WAITERS, checks again (a get may have
// freed a slot in between), and waits for a notice. Notices travel on the queue's own
// socketpair in the other direction: a get that gives a slot back while WAITERS > 0 sends a
// 1-byte datagram on the receiving end, which arrives at the sending end, which producers
// poll from the event loop. No thread and no timer per wait, and the kernel keeps a notice
// until someone reads it, so none is lost: a producer drains the notices, takes the slots it
// can, and if slots are still free and others still wait, passes a notice on.
import { addon, EAGAIN } from '../native/index.js';
import { QueueFullError } from '../errors.js';
import { keepFrame, type Endpoint, type Frame, type KeptFrame } from '../transport/index.js';
import type { SharedWords } from './shared-words.js';

export const COUNT = 0;
export const WAITERS = 1;

const NOTICE = Uint8Array.of(1);
const noticeBuffer = new Uint8Array(64);
const noticeFds = new Int32Array(2);

interface SlotWaiter {
  frame: KeptFrame;
  resolve(): void;
  reject(e: unknown): void;
  timer: NodeJS.Timeout | null;
}

export class Slots {
  readonly #words: Int32Array;
  readonly #endpoint: Endpoint;
  /** Infinity for an unbounded queue: then COUNT is kept only for qsize(). */
  readonly maxsize: number;
  #waiters: SlotWaiter[] = [];

  constructor(state: SharedWords, endpoint: Endpoint, maxsize: number) {
    this.#words = state.words;
    this.#endpoint = endpoint;
    this.maxsize = maxsize;
  }

  count(): number {
    return Atomics.load(this.#words, COUNT);
  }

  /** Takes a slot if one is free now (and no put of this process waits before us). */
  tryTake(): boolean {
    const w = this.#words;
    if (this.maxsize === Infinity) {
      Atomics.add(w, COUNT, 1);
      return true;
    }
    if (this.#waiters.length > 0) return false;
    for (;;) {
      const c = Atomics.load(w, COUNT);
      if (c >= this.maxsize) return false;
      if (Atomics.compareExchange(w, COUNT, c, c + 1) === c) return true;
    }
  }

  /** Gives back a slot taken for a message that was not sent. */
  giveBack(): void {
    this.taken();
  }

  /** A message left the socket (a get took it): its slot is free again. */
  taken(): void {
    Atomics.sub(this.#words, COUNT, 1);
    if (Atomics.load(this.#words, WAITERS) > 0) this.#notify();
  }

  #notify(): void {
    try {
      addon.send(this.#endpoint.recvFd, NOTICE); // EAGAIN: notices are waiting already
    } catch {
      // the queue is being closed: nobody to tell
    }
  }

  /** Sends `frame` once a slot is free; rejects with QueueFullError after `timeout` ms. */
  wait(frame: Frame, timeout: number | null): Promise<void> {
    const kept = keepFrame(frame);
    return new Promise<void>((resolve, reject) => {
      const w: SlotWaiter = { frame: kept, resolve, reject, timer: null };
      if (timeout !== null) {
        w.timer = setTimeout(() => {
          if (!this.#remove(w)) return;
          kept.dispose();
          kept.abandon();
          reject(new QueueFullError(`The queue stayed full (maxsize ${this.maxsize}) for ${timeout} ms. Consume faster, raise maxsize, or put with a longer timeout.`));
        }, timeout);
      }
      this.#waiters.push(w);
      Atomics.add(this.#words, WAITERS, 1);
      if (this.#waiters.length === 1) this.#endpoint.sendWatcher.onReadable(this.#serve);
      this.#serve(); // a slot may have been freed before WAITERS counted us
    });
  }

  #remove(w: SlotWaiter): boolean {
    const i = this.#waiters.indexOf(w);
    if (i < 0) return false;
    this.#waiters.splice(i, 1);
    Atomics.sub(this.#words, WAITERS, 1);
    if (w.timer !== null) clearTimeout(w.timer);
    if (this.#waiters.length === 0) this.#endpoint.sendWatcher.onReadable(null);
    return true;
  }

  readonly #serve = (): void => {
    const drained = this.#drainNotices();
    const w = this.#words;
    while (this.#waiters.length > 0) {
      const c = Atomics.load(w, COUNT);
      if (c >= this.maxsize) break;
      if (Atomics.compareExchange(w, COUNT, c, c + 1) !== c) continue;
      const waiter = this.#waiters[0]!;
      this.#remove(waiter);
      try {
        this.#endpoint.send(waiter.frame);
        waiter.resolve();
      } catch (e) {
        this.giveBack();
        waiter.frame.abandon();
        waiter.reject(e);
      } finally {
        waiter.frame.dispose();
      }
    }
    if (drained && this.#waiters.length === 0 && Atomics.load(w, COUNT) < this.maxsize && Atomics.load(w, WAITERS) > 0) this.#notify();
  };

  #drainNotices(): boolean {
    let any = false;
    for (;;) {
      let n: number;
      try {
        n = addon.recv(this.#endpoint.sendFd, noticeBuffer, noticeFds);
      } catch (e) {
        if ((e as { errno?: number }).errno === -90 /* EMSGSIZE */) continue; // not a notice: dropped
        return any;
      }
      if (n === EAGAIN || n < 0) return any;
      for (let i = 0; i < noticeFds[0]!; i++) addon.close(noticeFds[i + 1]!);
      any = true;
    }
  }

  /** Rejects every waiting put (the queue is closing here). */
  close(error: Error): void {
    for (const w of this.#waiters.slice()) {
      this.#remove(w);
      w.frame.dispose();
      w.frame.abandon();
      w.reject(error);
    }
  }
}
