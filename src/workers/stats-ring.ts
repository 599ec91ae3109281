// Counters' companions for `stats()` of the DataLoader and the Pool (API.md, "Observability"):
// a fixed ring of the last samples of a duration, summarized as percentiles when asked, and
// the busy share of each worker of a set.
//
// NOTE [Stats rings]
// stats() must be cheap enough to call in a hot loop and must cost nothing on a batch's or a
// task's path. So recording is a store into a preallocated Float64Array ring (the last 1,000
// samples, the oldest overwritten) and an addition for busy time: no allocation, no sorting.
// The percentiles are computed only when stats() asks: the ring is copied into a scratch array
// of the same fixed size, sorted there (a typed array's numeric sort, about 1,000 values) and
// read by nearest rank (torch and piscina report the same kind of figure). A ring with no
// sample yet reports 0 with count 0, so every figure is a finite number >= 0.

/** How many of the last samples a ring keeps. */
export const RING_SIZE = 1000;

/** Percentiles of a ring's samples (milliseconds for durations), and how many samples they summarize. */
export interface Percentiles {
  readonly p50: number;
  readonly p90: number;
  readonly p99: number;
  /** Samples summarized: at most RING_SIZE. */
  readonly count: number;
}

/** The last RING_SIZE samples of a quantity (NOTE [Stats rings]). */
export class SampleRing {
  readonly #values: Float64Array;
  readonly #scratch: Float64Array;
  #next = 0;
  #count = 0;

  constructor(size = RING_SIZE) {
    this.#values = new Float64Array(size);
    this.#scratch = new Float64Array(size);
  }

  /** Records one sample: a store, no allocation. */
  push(v: number): void {
    this.#values[this.#next] = v;
    this.#next = this.#next + 1 === this.#values.length ? 0 : this.#next + 1;
    if (this.#count < this.#values.length) this.#count++;
  }

  get count(): number {
    return this.#count;
  }

  /** p50, p90 and p99 of the samples kept, by nearest rank (0 with count 0 when empty). */
  percentiles(): Percentiles {
    const n = this.#count;
    if (n === 0) return { p50: 0, p90: 0, p99: 0, count: 0 };
    const sorted = this.#scratch.subarray(0, n);
    sorted.set(this.#values.subarray(0, n));
    sorted.sort();
    const at = (p: number) => sorted[Math.min(n - 1, Math.max(0, Math.ceil(p * n) - 1))]!;
    return { p50: at(0.5), p90: at(0.9), p99: at(0.99), count: n };
  }
}

/** Busy time per worker of a set since it started: each share is busy time over wall time, in [0, 1]. */
export class BusyClock {
  readonly #busy: Float64Array;
  readonly #since = performance.now();
  #until: number | null = null;

  constructor(workers: number) {
    this.#busy = new Float64Array(workers);
  }

  /** Worker `id` spent `ms` on one task or batch. */
  add(id: number, ms: number): void {
    if (id >= 0 && id < this.#busy.length) this.#busy[id]! += ms;
  }

  /** The set stopped: shares are over its lifetime from now on. */
  stop(): void {
    this.#until ??= performance.now();
  }

  /** Worker `id`'s busy share of the time since the set started (or until it stopped). */
  share(id: number): number {
    const wall = (this.#until ?? performance.now()) - this.#since;
    if (!(wall > 0)) return 0;
    return Math.min(1, Math.max(0, (this.#busy[id] ?? 0) / wall));
  }
}
