// A seeded PRNG (mulberry32) for the fault campaign: every random choice of a trial (its
// strategy, sizes, the points where it kills) is drawn from its seed, so that a failing trial
// can be run again exactly with --replay KIND:SEED.
export class Prng {
  #s: number;
  constructor(seed: number) {
    this.#s = seed >>> 0;
  }
  /** Uniform in [0, 1). */
  next(): number {
    let t = (this.#s = (this.#s + 0x6d2b79f5) >>> 0);
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 2 ** 32;
  }
  /** An integer in [lo, hi]. */
  int(lo: number, hi: number): number {
    return lo + Math.floor(this.next() * (hi - lo + 1));
  }
  pick<T>(xs: readonly T[]): T {
    return xs[Math.floor(this.next() * xs.length)]!;
  }
}
