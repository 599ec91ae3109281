// imap and imapUnordered as a Call (pool/calls.ts): an async iterator over the results that
// reads its input lazily.
import { MODE_ITEM } from './messages.js';
import { Call, type CallHost, type Taken } from './calls.js';

interface Waiter {
  resolve(r: IteratorResult<unknown>): void;
  reject(e: unknown): void;
}

/** An error in a chunk's place: what the consumer meets there. */
class Failure {
  constructor(readonly error: unknown) {}
}

/**
 * imap and imapUnordered: an async iterator over the results that reads its input lazily.
 * At most `ahead` chunks are taken from the input and not yet given to the consumer, so an
 * endless input takes bounded memory.
 */
export class IterCall extends Call implements AsyncIterableIterator<unknown> {
  readonly #ordered: boolean;
  readonly #ahead: number;
  readonly #sync: Iterator<unknown> | null;
  readonly #async: AsyncIterator<unknown> | null;
  /** Items read from an async input, not yet taken into a chunk. */
  #buffered: unknown[] = [];
  #reading = false;
  #sourceDone = false;
  /** Chunks taken from the input; chunks handed to the consumer. */
  #taken = 0;
  #consumed = 0;
  /** Ordered: results by chunk index, at index % ahead. Unordered: results as they come. */
  readonly #ring: (unknown[] | unknown | Failure | undefined)[];
  #arrived: (unknown[] | Failure)[] = [];
  #current: unknown[] | null = null;
  #pos = 0;
  #waiters: Waiter[] = [];
  /** #serve() is running: a #finish() inside its #step() leaves the waiters to it. */
  #serving = false;
  /** What the consumer gets once the results run out: done, or an error. */
  #end: Failure | null = null;
  #finished = false;

  constructor(
    host: CallHost,
    target: number,
    source: Iterable<unknown> | AsyncIterable<unknown>,
    chunkLen: number,
    ordered: boolean,
    ahead: number,
  ) {
    super(host, target, MODE_ITEM, chunkLen, true);
    this.#ordered = ordered;
    this.#ahead = ahead;
    this.#ring = ordered ? new Array(ahead) : [];
    if (Symbol.asyncIterator in source) {
      this.#async = (source as AsyncIterable<unknown>)[Symbol.asyncIterator]();
      this.#sync = null;
    } else {
      this.#sync = (source as Iterable<unknown>)[Symbol.iterator]();
      this.#async = null;
    }
  }

  /** An imap's chunk waits from when it is read and given out, not from the call (NOTE [Pool stats]). */
  override queuedAt(now: number): number {
    return now;
  }

  queuedTasks(): number {
    return this.settled ? 0 : this.#buffered.length;
  }

  take(): Taken | null {
    if (this.exhausted || this.settled || this.#taken - this.#consumed >= this.#ahead) return null;
    const items: unknown[] = [];
    try {
      if (this.#sync !== null) {
        while (items.length < this.chunkLen) {
          const r = this.#sync.next();
          if (r.done) {
            this.#sourceDone = true;
            break;
          }
          items.push(r.value);
        }
      } else {
        if (this.#buffered.length < this.chunkLen && !this.#sourceDone) {
          this.#read();
          return null;
        }
        const n = Math.min(this.chunkLen, this.#buffered.length);
        for (let i = 0; i < n; i++) items.push(this.#buffered[i]);
        this.#buffered.splice(0, n);
      }
    } catch (e) {
      this.#inputFailed(e);
      return null;
    }
    if (this.#sourceDone && this.#buffered.length === 0) this.exhausted = true;
    if (items.length === 0) {
      this.#maybeFinish();
      return null;
    }
    return { call: this, index: this.#taken++, kept: this.chunkLen === 1 ? items[0] : items, items };
  }

  /** Reads an async input ahead, into #buffered, up to what the consumer allows. */
  #read(): void {
    if (this.#reading || this.#sourceDone || this.settled) return;
    this.#reading = true;
    void (async () => {
      try {
        while (!this.#sourceDone && !this.settled && this.#buffered.length < this.chunkLen && this.#taken - this.#consumed < this.#ahead) {
          const r = await this.#async!.next();
          if (r.done) this.#sourceDone = true;
          else this.#buffered.push(r.value);
        }
      } catch (e) {
        this.#inputFailed(e);
      } finally {
        this.#reading = false;
      }
      if (this.#sourceDone && this.#buffered.length === 0) {
        this.exhausted = true;
        this.#maybeFinish();
      }
      this.host.wake();
    })();
  }

  /** The input threw: the consumer meets the error after the results of the chunks before it. */
  #inputFailed(e: unknown): void {
    this.#sourceDone = true;
    this.#buffered = [];
    this.exhausted = true;
    this.#end = new Failure(e);
    this.#maybeFinish();
  }

  resend(_index: number, kept: unknown): ArrayLike<unknown> {
    return this.chunkLen === 1 ? [kept] : (kept as unknown[]);
  }

  done(index: number, values: ArrayLike<unknown>, at: number, n: number): void {
    // An array whatever `values` is (packed numbers: NOTE [Packed numbers]).
    this.#arrive(index, Array.prototype.slice.call(values, at, at + n) as unknown[]);
  }

  failed(index: number, error: unknown): void {
    this.#arrive(index, new Failure(error));
  }

  #arrive(index: number, r: unknown[] | Failure): void {
    if (this.settled) return;
    if (this.#ordered) this.#ring[index % this.#ahead] = r;
    else this.#arrived.push(r);
    this.#serve();
  }

  fail(error: unknown): void {
    if (this.settled) return;
    this.#end = new Failure(error);
    this.#current = null;
    this.#arrived = [];
    this.#ring.fill(undefined);
    this.#finish();
  }

  /**
   * Settles the waiting consumers that can be answered now. Not re-entered: #step() can
   * finish the call (a failed chunk), and #finish() serves; a nested pass would answer the
   * waiters this one has taken a result for, and this one would then shift a waiter that is
   * no longer there (the crash of issue 24: "reading 'resolve'").
   */
  #serve(): void {
    if (this.#serving) return;
    this.#serving = true;
    try {
      while (this.#waiters.length > 0) {
        const r = this.#step();
        if (r === undefined) return;
        const w = this.#waiters.shift()!;
        if (r instanceof Failure) w.reject(r.error);
        else w.resolve(r);
      }
    } finally {
      this.#serving = false;
    }
  }

  /** The consumer's next result if there is one now (undefined: wait). */
  #step(): IteratorResult<unknown> | Failure | undefined {
    for (;;) {
      if (this.#current !== null && this.#pos < this.#current.length) return { value: this.#current[this.#pos++], done: false };
      this.#current = null;
      if (this.#finished) {
        // An error is met once; then the iteration is done.
        const end = this.#end;
        this.#end = null;
        return end ?? { value: undefined, done: true };
      }
      let r: unknown[] | Failure | undefined;
      if (this.#ordered) {
        const at = this.#consumed % this.#ahead;
        r = this.#ring[at] as unknown[] | Failure | undefined;
        if (r !== undefined) this.#ring[at] = undefined;
      } else {
        r = this.#arrived.shift();
      }
      if (r === undefined) {
        if (this.exhausted && this.#consumed === this.#taken) {
          this.#finish();
          continue;
        }
        return undefined;
      }
      this.#consumed++;
      this.host.wake(); // room for one more chunk
      if (r instanceof Failure) {
        // CPython's imap raises at the failed item; here the iteration ends there.
        this.host.cancel(this, false);
        this.#end = r;
        this.#finish();
        continue;
      }
      this.#current = r;
      this.#pos = 0;
    }
  }

  #maybeFinish(): void {
    if (this.exhausted && this.#consumed === this.#taken) this.#serve();
  }

  #finish(): void {
    if (this.#finished) return;
    this.#finished = true;
    this.settle();
    this.#closeSource();
    this.#serve();
  }

  /** An input not read to its end is closed, as for-of closes an iterator it leaves. */
  #closeSource(): void {
    if (this.#sourceDone) return;
    this.#sourceDone = true;
    this.exhausted = true;
    this.#buffered = [];
    try {
      if (this.#sync !== null) this.#sync.return?.();
      else void this.#async!.return?.()?.then(undefined, () => {});
    } catch {
      // an input that fails to close: nothing more is read from it anyway
    }
  }

  next(): Promise<IteratorResult<unknown>> {
    if (this.#waiters.length === 0) {
      const r = this.#step();
      if (r instanceof Failure) return Promise.reject(r.error);
      if (r !== undefined) return Promise.resolve(r);
    }
    return new Promise((resolve, reject) => {
      this.#waiters.push({ resolve, reject });
    });
  }

  /** Leaving early (`break`): the chunks not started are dropped, those running finish unread. */
  return(): Promise<IteratorResult<unknown>> {
    if (!this.settled) {
      this.host.cancel(this, false);
      this.#end = null;
      this.#current = null;
      this.#finish();
    }
    return Promise.resolve({ value: undefined, done: true });
  }

  [Symbol.asyncIterator](): this {
    return this;
  }
}
