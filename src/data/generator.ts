// A seeded pseudo-random generator, torch.Generator's counterpart: Math.random cannot be
// seeded, and a data loader must give the same order and the same per-worker seeds for the
// same seed. xoshiro128** (Blackman and Vigna): 128 bits of state, 32-bit outputs, fast in
// plain JavaScript (no BigInt), and its state is four numbers that a state dict can carry.
import { randomInt } from 'node:crypto';
import { InvalidArgumentError } from '../errors.js';

/** Seeds are integers in [0, 2**52): base seed + worker id stays a safe integer. */
export const MAX_SEED = 2 ** 52;

export type GeneratorState = readonly [number, number, number, number];

/** SplitMix32-style finaliser: spreads a 32-bit word over all 32 bits. */
function mix32(x: number): number {
  x = Math.imul(x ^ (x >>> 16), 0x21f0aaad);
  x = Math.imul(x ^ (x >>> 15), 0x735a2d97);
  return (x ^ (x >>> 15)) >>> 0;
}

export function checkSeed(seed: unknown, what = 'seed'): number {
  if (typeof seed !== 'number' || !Number.isInteger(seed) || seed < 0 || seed >= MAX_SEED) {
    throw new InvalidArgumentError(`${what} must be an integer in [0, 2**52) (got ${String(seed)}).`);
  }
  return seed;
}

/** A fresh seed from the operating system, for a generator nobody seeded. */
export function randomSeed(): number {
  return randomInt(2 ** 26) * 2 ** 26 + randomInt(2 ** 26);
}

export class Generator {
  #s0 = 0;
  #s1 = 0;
  #s2 = 0;
  #s3 = 0;
  #initial = 0;

  /** `seed`: an integer in [0, 2**52); without one, a seed from the operating system. */
  constructor(seed?: number) {
    this.manualSeed(seed === undefined ? randomSeed() : seed);
  }

  /** torch's manual_seed(): restarts the stream from `seed`. */
  manualSeed(seed: number): this {
    checkSeed(seed);
    this.#initial = seed;
    const lo = seed >>> 0;
    const hi = Math.floor(seed / 2 ** 32) >>> 0;
    // Four words that differ even for seeds that differ in one bit; never all zero (the one
    // state xoshiro cannot leave), since mix32 is a bijection and the inputs differ.
    this.#s0 = mix32(lo ^ 0x9e3779b9);
    this.#s1 = mix32(hi ^ 0x85ebca6b ^ this.#s0);
    this.#s2 = mix32(lo ^ 0xc2b2ae35 ^ this.#s1);
    this.#s3 = mix32(hi ^ 0x27d4eb2f ^ this.#s2);
    if ((this.#s0 | this.#s1 | this.#s2 | this.#s3) === 0) this.#s0 = 1;
    return this;
  }

  /** The seed this stream started from (torch's initial_seed()). */
  initialSeed(): number {
    return this.#initial;
  }

  /** A uniformly distributed 32-bit unsigned integer. */
  nextUint32(): number {
    const s0 = this.#s0,
      s1 = this.#s1,
      s2 = this.#s2,
      s3 = this.#s3;
    const r = Math.imul(rotl(Math.imul(s1, 5), 7), 9) >>> 0;
    const t = s1 << 9;
    let n2 = s2 ^ s0;
    let n3 = s3 ^ s1;
    const n1 = s1 ^ n2;
    const n0 = s0 ^ n3;
    n2 ^= t;
    n3 = rotl(n3, 11);
    this.#s0 = n0 >>> 0;
    this.#s1 = n1 >>> 0;
    this.#s2 = n2 >>> 0;
    this.#s3 = n3 >>> 0;
    return r;
  }

  /** A float in [0, 1) with 53 random bits, like Math.random. */
  random(): number {
    const hi = this.nextUint32() >>> 5; // 27 bits
    const lo = this.nextUint32() >>> 6; // 26 bits
    return (hi * 2 ** 26 + lo) / 2 ** 53;
  }

  /** An integer in [0, n), unbiased (rejection of the short last block); n up to 2**32. */
  randint(n: number): number {
    if (!Number.isInteger(n) || n < 1 || n > 2 ** 32) {
      throw new InvalidArgumentError(`randint(n) needs an integer n in [1, 2**32] (got ${String(n)}).`);
    }
    const limit = 2 ** 32 - (2 ** 32 % n);
    let x = this.nextUint32();
    while (x >= limit) x = this.nextUint32();
    return x % n;
  }

  /** A new seed in [0, 2**52), for a worker's base seed or a child generator. */
  seed(): number {
    return (this.nextUint32() >>> 12) * 2 ** 32 + this.nextUint32();
  }

  /** A random permutation of 0..n-1 (Fisher-Yates), torch's randperm. */
  randperm(n: number): number[] {
    const out = new Array<number>(n);
    for (let i = 0; i < n; i++) out[i] = i;
    for (let i = n - 1; i > 0; i--) {
      const j = this.randint(i + 1);
      const x = out[i]!;
      out[i] = out[j]!;
      out[j] = x;
    }
    return out;
  }

  /** The state, to carry in a state dict and give back to setState(). */
  getState(): GeneratorState {
    return [this.#s0, this.#s1, this.#s2, this.#s3];
  }

  setState(state: unknown): this {
    if (
      !Array.isArray(state) ||
      state.length !== 4 ||
      !state.every((w) => Number.isInteger(w) && w >= 0 && w < 2 ** 32) ||
      state.every((w) => w === 0)
    ) {
      throw new InvalidArgumentError('A generator state is four 32-bit unsigned integers, not all zero, as getState() returns them.');
    }
    [this.#s0, this.#s1, this.#s2, this.#s3] = state as [number, number, number, number];
    return this;
  }
}

function rotl(x: number, k: number): number {
  return (x << k) | (x >>> (32 - k));
}
