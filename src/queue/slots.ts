// Exact `maxsize` backpressure across processes.
//
// NOTE [Queue slots]
// A bounded queue keeps two words in its shared state (shared-words.ts): COUNT, the
// messages put and not yet taken, and WAITERS, the puts waiting for a free slot in all
// processes. A put encodes its message, then takes a slot with a compare-and-swap (COUNT <
// maxsize), then sends; a get gives one back as soon as it has taken a datagram off the
// socket. Nothing ever waits on a lock, so a process killed at any point cannot block the
// others; the worst a kill can do is lose one slot (a producer killed between taking its
// slot and sending, or a consumer between receiving and giving it back: a window of a few
// instructions, with no encoding or copy inside it).
// A put that finds the queue full counts itself in WAITERS, checks again (a get may have
// freed a slot in between), and waits for a notice. Notices travel on the queue's own
// socketpair in the other direction: a get that gives a slot back while WAITERS > 0 sends a
// 1-byte datagram on the receiving end, which arrives at the sending end, which producers
// poll from the event loop. No thread and no timer per wait, and the kernel keeps a notice
// until someone reads it, so none is lost. A get sends it as soon as it has freed the slot.
// A third word, NOTICED, says a notice is on its way
// and not yet read: gets do not send another until a producer that has read it clears it
// (after reading it, never before, and before looking at COUNT, so that a slot freed after
// that look sends a new notice). A producer killed between reading a notice and clearing
// NOTICED (a few instructions) would leave it set; that is the one kill this can't absorb. A queue kept full by a fast producer then costs one notice per wake-up of the
// producer, not one per get, and the producer fills every slot freed meanwhile at once.
// A producer that takes fewer slots than are free while others still wait passes a notice on.
// Word 16, SENT, on a cache line of its own, is bumped by every put once its datagram is
// sent: what a get that found the queue empty watches before it sleeps (NOTE [Spinning before
// sleeping], spin.ts).
// A waiting put holds its value, not an encoded message: it is encoded when its slot is
// taken (as torch's feeder pickles later), so a wait costs no copy and no descriptor.
import { addon, EAGAIN, EMSGSIZE, RECV_EMPTY, RECV_NO_PROBE } from '../native/index.js';
import { QueueFullError } from '../errors.js';
import type { Endpoint, Frame } from '../transport/index.js';
import type { SharedWords } from './shared-words.js';
import { GetSpin } from './spin.js';

export const COUNT = 0;
export const WAITERS = 1;
export const NOTICED = 2;

const NOTICE = Uint8Array.of(1);

const noticeBuffer = new Uint8Array(64);
const noticeFds = new Int32Array(2);

interface SlotWaiter {
  value: unknown;
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

  /** Whether a put may try to take a slot now (tryTake() may still lose the race). */
  hasRoom(): boolean {
    return this.maxsize === Infinity || (this.#waiters.length === 0 && Atomics.load(this.#words, COUNT) < this.maxsize);
  }

  /** Takes a slot if one is free now (and no put of this process waits before us). */
  tryTake(): boolean {
    const w = this.#words;
    if (this.maxsize === Infinity) {
      Atomics.add(w, COUNT, 1);
      return true;
    }
    return this.#waiters.length === 0 && this.#claim();
  }

  /** Takes a slot if COUNT < maxsize, by a compare-and-swap (no lock: NOTE [Queue slots]). */
  #claim(): boolean {
    const w = this.#words;
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

  /**
   * A message left the socket (a get took it): its slot is free again, and a waiting
   * producer hears of it now. Not at the end of the consumer's turn: a consumer that takes
   * message after message without returning to the event loop would hold the notice back
   * for as long as it works (the producers idle meanwhile), and a kill in that time would
   * leave them waiting for good. NOTICED keeps it to one notice per producer wake-up.
   */
  taken(): void {
    const w = this.#words;
    // Never below zero: a datagram no tensorproc process sent (a malformed one, dropped with
    // a coded error) took no slot, and counting it would make qsize() negative and let the
    // queue hold that many messages past maxsize for good. Every message of ours in the socket
    // holds a slot, so COUNT is 0 only when the datagram was not one of them (a foreign
    // datagram read ahead of a real one frees that one's slot early: one message more, once).
    for (;;) {
      const c = Atomics.load(w, COUNT);
      if (c <= 0 || Atomics.compareExchange(w, COUNT, c, c - 1) === c) break;
    }
    if (Atomics.load(w, WAITERS) > 0) this.#notify();
  }

  #notify(): void {
    if (Atomics.compareExchange(this.#words, NOTICED, 0, 1) !== 0) return; // one is on its way
    try {
      addon.send(this.#endpoint.recvFd, NOTICE); // EAGAIN: notices are waiting already
    } catch {
      // Not sent (the descriptor is gone): no notice is on its way after all. Leaving NOTICED
      // set would stop every other process from sending one.
      Atomics.store(this.#words, NOTICED, 0);
    }
  }

  /**
   * Sends `value` (encoded then, not now) once a slot is free; rejects with QueueFullError
   * after `timeout` ms (the error names `given`: the put's timeout, some of it spent spinning).
   */
  wait(value: unknown, timeout: number | null, given: number | null = timeout): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const w: SlotWaiter = { value, resolve, reject, timer: null };
      if (timeout !== null) {
        w.timer = setTimeout(() => {
          if (!this.#remove(w)) return;
          reject(
            new QueueFullError(
              `The queue stayed full (maxsize ${this.maxsize}) for ${given} ms. Consume faster, raise maxsize, or put with a longer timeout.`,
            ),
          );
        }, timeout);
      }
      this.#waiters.push(w);
      this.#endpoint.pin(1);
      Atomics.add(this.#words, WAITERS, 1);
      if (this.#waiters.length === 1) this.#endpoint.sendWatcher.onReadable(this.#serve);
      this.#serve(); // a slot may have been freed before WAITERS counted us
    });
  }

  #remove(w: SlotWaiter): boolean {
    const i = this.#waiters.indexOf(w);
    if (i < 0) return false;
    this.#waiters.splice(i, 1);
    this.#endpoint.pin(-1);
    Atomics.sub(this.#words, WAITERS, 1);
    if (w.timer !== null) clearTimeout(w.timer);
    if (this.#waiters.length === 0) this.#endpoint.sendWatcher.onReadable(null);
    return true;
  }

  // Read, then clear: NOTICED = 1 must always mean "a notice is in the socket, or a producer
  // has just read it and will look at COUNT". Clearing before reading (as this once did) let
  // a notice sent between the two be read by the same serve, leaving NOTICED = 1 with nothing
  // in the socket: every later get then skipped its notice, and producers waited forever on
  // a queue with free slots (seen about once in 50 runs of the 4x2 test). A serve that read
  // nothing (called from wait(), or woken with a faster producer) leaves NOTICED alone.
  readonly #serve = (): void => {
    const w = this.#words;
    const drained = this.#readNotice();
    if (drained) Atomics.store(w, NOTICED, 0);
    // Each message is encoded before its slot is taken, so that a kill can lose a slot only
    // between taking it and sending (a few instructions), never during an encoding.
    while (this.#waiters.length > 0 && Atomics.load(w, COUNT) < this.maxsize) {
      const waiter = this.#waiters[0]!;
      let frame: Frame;
      try {
        frame = this.#endpoint.encode(waiter.value);
      } catch (e) {
        this.#remove(waiter);
        waiter.reject(e);
        continue;
      }
      if (!this.#claim()) {
        frame.abandon(); // another process took the slot meanwhile
        break;
      }
      this.#remove(waiter);
      try {
        this.#endpoint.sendEncoded(frame);
        GetSpin.sent(w); // NOTE [Spinning before sleeping]
        waiter.resolve();
      } catch (e) {
        this.giveBack();
        waiter.reject(e);
      }
    }
    if (drained && this.#waiters.length === 0 && Atomics.load(w, COUNT) < this.maxsize && Atomics.load(w, WAITERS) > 0) this.#notify();
  };

  /**
   * Reads one notice if there is one. One is usually all there is (NOTICED); any other
   * keeps the descriptor readable and wakes us again.
   */
  #readNotice(): boolean {
    for (;;) {
      let n: number;
      try {
        // A notice carries no descriptor: no slot need be free for it (NOTE [Receiving
        // descriptors]), so a producer out of descriptors still hears of free slots.
        n = addon.recv(this.#endpoint.sendFd, noticeBuffer, noticeFds, RECV_NO_PROBE);
      } catch (e) {
        const code = (e as { code?: string }).code;
        // Not a notice (too large, or with descriptors it had no room for): dropped.
        if ((e as { errno?: number }).errno === EMSGSIZE || code === 'EMFILE' || code === 'ENFILE') continue;
        return false;
      }
      if (n === RECV_EMPTY) continue; // not a notice either
      if (n === EAGAIN || n < 0) return false;
      for (let i = 0; i < noticeFds[0]!; i++) addon.close(noticeFds[i + 1]!);
      return true;
    }
  }

  /** Puts of this process waiting for a slot now. */
  get waiting(): number {
    return this.#waiters.length;
  }

  /** Rejects every waiting put (the queue is closing here). */
  close(error: Error): void {
    for (const w of this.#waiters.slice()) {
      this.#remove(w);
      w.reject(error);
    }
  }
}
