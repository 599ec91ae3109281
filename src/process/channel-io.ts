// Reading and writing framed messages on a non-blocking SEQPACKET descriptor, for both ends
// of the spawn control channel (see NOTE [Spawn control channel] in messages.ts).
// The addon alone, not src/native/index.js: a child loads this before its target, and every
// module it loads counts in W2.
import { addon, EAGAIN, POLL_READABLE, POLL_WRITABLE, POLL_DISCONNECT, type NativePoll } from '../native/addon.js';
import { FrameAssembler, MAX_DATAGRAM } from './messages.js';

/**
 * Sends every frame in order. Resolves at once when the socket buffer takes them all (the
 * usual case: one small frame); otherwise waits for writability. Rejects if the peer is gone.
 */
export function sendFrames(fd: number, frames: Uint8Array[]): Promise<void> {
  let next = 0;
  const pump = (): boolean => {
    while (next < frames.length) {
      if (addon.send(fd, frames[next]!) === EAGAIN) return false;
      next++;
    }
    return true;
  };
  try {
    if (pump()) return Promise.resolve();
  } catch (e) {
    return Promise.reject(e);
  }
  return new Promise((resolve, reject) => {
    const poll = new addon.Poll(fd, (status) => {
      try {
        if (status < 0 || pump()) {
          poll.close();
          if (status < 0) reject(new Error(`polling the spawn channel failed (${status})`));
          else resolve();
        }
      } catch (e) {
        poll.close();
        reject(e);
      }
    });
    poll.start(POLL_WRITABLE);
  });
}

/**
 * Receives messages as they arrive. `onMessage` runs for each whole message, `onEnd` once
 * when the peer has closed its end. `drain()` reads whatever is waiting right now, without
 * the event loop; `watch()` keeps reading from the event loop until end or `close()`.
 */
export class ChannelReader<M> {
  readonly #fd: number;
  readonly #assembler = new FrameAssembler<M>();
  readonly #buffer = new Uint8Array(MAX_DATAGRAM);
  readonly #fdsOut = new Int32Array(2);
  readonly #onMessage: (m: M) => void;
  readonly #onEnd: () => void;
  #poll: NativePoll | null = null;
  #ended = false;

  constructor(fd: number, onMessage: (m: M) => void, onEnd: () => void) {
    this.#fd = fd;
    this.#onMessage = onMessage;
    this.#onEnd = onEnd;
  }

  drain(): void {
    while (!this.#ended) {
      let n: number;
      try {
        n = addon.recv(this.#fd, this.#buffer, this.#fdsOut);
      } catch {
        n = -1; // ECONNRESET and friends: the peer is gone all the same
      }
      if (n === EAGAIN) return;
      if (n < 0) {
        this.#end();
        return;
      }
      // The control channel carries no descriptors; one sent anyway must not stay open here.
      for (let i = 1; i <= this.#fdsOut[0]!; i++) addon.close(this.#fdsOut[i]!);
      const m = this.#assembler.push(this.#buffer.subarray(0, n));
      if (m !== undefined) this.#onMessage(m);
    }
  }

  /** Starts reading from the event loop. An unref'd watch does not keep the process alive. */
  watch(ref: boolean): void {
    if (this.#ended || this.#poll) return;
    this.#poll = new addon.Poll(this.#fd, (status, events) => {
      if (status < 0 || events & POLL_DISCONNECT) {
        this.drain();
        this.#end();
      } else {
        this.drain();
      }
    });
    this.#poll.start(POLL_READABLE | POLL_DISCONNECT);
    if (!ref) this.#poll.unref();
  }

  setRef(ref: boolean): void {
    if (ref) this.#poll?.ref();
    else this.#poll?.unref();
  }

  /** Stops watching; the descriptor stays open (its owner closes it). */
  close(): void {
    this.#poll?.close();
    this.#poll = null;
  }

  #end(): void {
    if (this.#ended) return;
    this.#ended = true;
    this.close();
    this.#onEnd();
  }
}
