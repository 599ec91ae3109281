// The last N samples of a duration, kept for stats() (pool.stats(), loader.stats()).
//
// NOTE [Stats rings]
// stats() must be cheap to call in a hot loop and cost nothing on a task's path: a sample is
// one write into a preallocated Float64Array (no allocation, no sorting), and the
// percentiles are computed only when stats() asks, by sorting a copy of at most N numbers
// (N = 1,000: about 20 µs). Percentiles are nearest-rank over the samples held; with none,
// each is 0 and `count` says so.

/** Percentiles of the last samples, in milliseconds. */
export interface Percentiles {
  p50: number;
  p90: number;
  p99: number;
  /** How many samples they are over (at most 1,000). */
  count: number;
}

export class StatsRing {
  readonly #values: Float64Array;
  #next = 0;
  #count = 0;

  constructor(size = 1000) {
    this.#values = new Float64Array(size);
  }

  add(ms: number): void {
    this.#values[this.#next] = ms;
    this.#next = this.#next + 1 === this.#values.length ? 0 : this.#next + 1;
    if (this.#count < this.#values.length) this.#count++;
  }

  percentiles(): Percentiles {
    const n = this.#count;
    if (n === 0) return { p50: 0, p90: 0, p99: 0, count: 0 };
    const sorted = this.#values.slice(0, n).sort();
    const at = (p: number): number => round(sorted[Math.min(n - 1, Math.ceil(p * n) - 1)]!);
    return { p50: at(0.5), p90: at(0.9), p99: at(0.99), count: n };
  }
}

/** Milliseconds to the microsecond: what a stats() reader can use. */
function round(ms: number): number {
  return Math.round(ms * 1000) / 1000;
}
