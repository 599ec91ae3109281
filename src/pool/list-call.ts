// map, starmap and apply as a Call (pool/calls.ts): the input an array, the results one promise.
import { MODE_ITEM, MODE_STAR, PACK_MIN, copyResults, packRange, resultArray } from './messages.js';
import { Call, type CallHost, type Taken } from './calls.js';

/**
 * map, starmap (results in order, one promise) and apply (one result). The input is an
 * array read by index, so a chunk is sent again from it and nothing needs keeping.
 */
export class ListCall extends Call {
  readonly promise: Promise<unknown>;
  #resolve!: (v: unknown) => void;
  #reject!: (e: unknown) => void;
  readonly #src: readonly unknown[];
  /** Made when the first results arrive, for their kind (resultArray()). */
  #out: unknown[] | null = null;
  readonly #chunks: number;
  readonly #single: boolean;
  #next = 0;
  #remaining: number;

  constructor(host: CallHost, target: number, star: boolean, src: readonly unknown[], chunkLen: number, single: boolean) {
    super(host, target, star ? MODE_STAR : MODE_ITEM, chunkLen, false);
    this.promise = new Promise((resolve, reject) => {
      this.#resolve = resolve;
      this.#reject = reject;
    });
    this.#src = src;
    this.#single = single;
    this.#chunks = Math.ceil(src.length / chunkLen);
    this.#remaining = this.#chunks;
    if (this.#chunks === 0) {
      this.exhausted = true;
      this.settle();
      this.#resolve([]);
    }
  }

  take(): Taken | null {
    if (this.#next >= this.#chunks) return null;
    const index = this.#next++;
    if (this.#next === this.#chunks) this.exhausted = true;
    return { call: this, index, kept: undefined, items: this.resend(index) };
  }

  queuedTasks(): number {
    return this.settled ? 0 : Math.max(0, this.#src.length - this.#next * this.chunkLen);
  }

  /** A long chunk of numbers packed straight from the input (NOTE [Packed numbers]), else a slice of it. */
  resend(index: number): ArrayLike<unknown> {
    const from = index * this.chunkLen;
    const to = Math.min(from + this.chunkLen, this.#src.length);
    return (to - from >= PACK_MIN ? packRange(this.#src, from, to) : null) ?? this.#src.slice(from, to);
  }

  override lengthOf(index: number): number {
    return Math.min(this.chunkLen, this.#src.length - index * this.chunkLen);
  }

  done(index: number, values: ArrayLike<unknown>, at: number, n: number): void {
    const out = (this.#out ??= resultArray(this.#src.length, values));
    copyResults(out, index * this.chunkLen, values, at, n);
    if (--this.#remaining === 0) {
      this.settle();
      this.#resolve(this.#single ? out[0] : out);
    }
  }

  failed(_index: number, error: unknown): void {
    // CPython's map keeps the first error; the rest of the call is not wanted any more.
    this.host.cancel(this, false);
    this.fail(error);
  }

  fail(error: unknown): void {
    if (this.settled) return;
    this.settle();
    // The results that arrived before are never handed out: let go of them now. A call stays
    // reachable from its pool while chunks of it are at a worker (a stopped one's for good),
    // and a result tensor kept here would keep its segment (under file_system, its name)
    // until the pool itself is collected.
    this.#out = null;
    this.#reject(error);
  }
}
