// Readiness of one descriptor from the event loop, shared by everything that waits on it.
// libuv allows one poll handle per descriptor and loop, and a queue's producer side waits on
// one descriptor for two things (room to send a kept frame, and notices of free slots), so
// each descriptor has one Watcher with a readable and a writable interest.
//
// Polls are level-triggered: a poll left started while nobody wants the event would fire on
// every loop turn. But stopping and starting costs epoll_ctl calls, and a consumer that gets
// one message after another would pay them on every get. So a poll nobody wants is only
// unref'd (it no longer keeps the process alive), and stopped when it next fires unwanted.
import { addon, POLL_READABLE, POLL_WRITABLE, POLL_DISCONNECT, type NativePoll } from '../native/index.js';

export type ReadyCallback = (failed: boolean) => void;

export class Watcher {
  readonly fd: number;
  #poll: NativePoll | null = null;
  #started = 0;
  #readable: ReadyCallback | null = null;
  #writable: ReadyCallback | null = null;
  /** Whether a writable interest keeps the process alive (it does unless told otherwise). */
  #writableKeepsAlive = true;
  #closed = false;

  constructor(fd: number) {
    this.fd = fd;
  }

  /** Calls `cb` whenever the descriptor is readable (or hung up), until set to null. */
  onReadable(cb: ReadyCallback | null): void {
    if (cb === this.#readable) return; // each waiting get asks again: nothing to change
    this.#readable = cb;
    this.#update();
  }

  onWritable(cb: ReadyCallback | null): void {
    if (cb === this.#writable) return;
    this.#writable = cb;
    this.#update();
  }

  /**
   * Whether waiting for room to write keeps the process alive (default true): false lets a
   * process exit with frames still unsent (Queue.cancelJoinThread()).
   */
  setWritableKeepsAlive(keep: boolean): void {
    this.#writableKeepsAlive = keep;
    this.#update();
  }

  #wanted(): number {
    return (this.#readable ? POLL_READABLE | POLL_DISCONNECT : 0) | (this.#writable ? POLL_WRITABLE : 0);
  }

  #update(): void {
    if (this.#closed) return;
    const wanted = this.#wanted();
    if (wanted === 0) {
      this.#poll?.unref();
      return;
    }
    if (this.#poll === null) this.#poll = new addon.Poll(this.fd, (status, events) => this.#fire(status, events));
    if ((this.#started & wanted) !== wanted) {
      this.#started |= wanted;
      this.#poll.start(this.#started);
    }
    if (this.#readable !== null || this.#writableKeepsAlive) this.#poll.ref();
    else this.#poll.unref();
  }

  #fire(status: number, events: number): void {
    const failed = status < 0;
    // libuv stops a poll that reports an error: a later interest must start it again.
    if (failed) this.#started = 0;
    if (this.#wanted() === 0) {
      // Fired while nobody wants it: now stop (see the note at the top).
      this.#started = 0;
      this.#poll?.stop();
      return;
    }
    const r = this.#readable;
    const w = this.#writable;
    if (r !== null && (failed || events & (POLL_READABLE | POLL_DISCONNECT))) r(failed);
    if (w !== null && this.#writable === w && (failed || events & POLL_WRITABLE)) w(failed);
    if (this.#closed || this.#poll === null) return;
    const wanted = this.#wanted();
    if (wanted !== 0 && wanted !== this.#started) {
      // Still wanted, but not all of it: narrow now, a stale writable interest would fire
      // on every turn.
      this.#started = wanted;
      this.#poll.start(wanted);
    }
  }

  close(): void {
    this.#closed = true;
    this.#readable = this.#writable = null;
    this.#poll?.close();
    this.#poll = null;
  }
}
