// Samplers, as torch/utils/data/sampler.py: iterables of dataset indices (or, for a batch
// sampler, of arrays of indices), with a `length` when it is known. Any iterable the user
// writes is a sampler too (a custom sampler); these are the ones torch ships.
import { InvalidArgumentError } from '../errors.js';
import { Generator } from './generator.js';

export interface Sampler<T = number> extends Iterable<T> {
  /** How many items one pass yields, when known (torch's __len__). */
  readonly length?: number;
}

/** What a sampler draws from: a length, or anything with one (a dataset). */
export type SizedSource = number | { readonly length: number };

function lengthOf(source: SizedSource): number {
  const n = typeof source === 'number' ? source : source.length;
  if (!Number.isInteger(n) || n < 0) {
    throw new InvalidArgumentError(`A sampler needs a length that is a non-negative integer (got ${String(n)}).`);
  }
  return n;
}

function checkSource(source: unknown): SizedSource {
  if (typeof source === 'number' || (source !== null && typeof source === 'object' && 'length' in source)) {
    lengthOf(source as SizedSource);
    return source as SizedSource;
  }
  throw new InvalidArgumentError('A sampler draws from a length or from an object with a `length` (a dataset).');
}

/** 0, 1, …, length-1 in order. The length is read at each pass (a dataset may grow). */
export class SequentialSampler implements Sampler {
  readonly #source: SizedSource;
  constructor(source: SizedSource) {
    this.#source = checkSource(source);
  }
  get length(): number {
    return lengthOf(this.#source);
  }
  *[Symbol.iterator](): Iterator<number> {
    const n = this.length;
    for (let i = 0; i < n; i++) yield i;
  }
}

export interface RandomSamplerOptions {
  /** Draw with replacement (each draw independent). Default false: a permutation. */
  replacement?: boolean;
  /** How many indices a pass yields; default the source's length. */
  numSamples?: number;
  /** The stream drawn from; default a new Generator seeded by the operating system. */
  generator?: Generator;
}

/**
 * Indices in random order. Without replacement, each pass is a permutation (several, cut
 * short, when numSamples exceeds the length), as torch's RandomSampler; with replacement,
 * independent draws. Each pass continues the generator's stream, so epochs differ and the
 * same seed gives the same epochs.
 */
export class RandomSampler implements Sampler {
  readonly #source: SizedSource;
  readonly replacement: boolean;
  readonly #numSamples: number | undefined;
  readonly generator: Generator;

  constructor(source: SizedSource, options: RandomSamplerOptions = {}) {
    this.#source = checkSource(source);
    const { replacement = false, numSamples, generator } = options;
    if (typeof replacement !== 'boolean') throw new InvalidArgumentError(`replacement must be a boolean (got ${String(replacement)}).`);
    if (numSamples !== undefined && (!Number.isInteger(numSamples) || numSamples <= 0)) {
      throw new InvalidArgumentError(`numSamples must be a positive integer (got ${String(numSamples)}).`);
    }
    if (generator !== undefined && !(generator instanceof Generator)) {
      throw new InvalidArgumentError('generator must be a tensorproc Generator (new mp.Generator(seed)).');
    }
    this.replacement = replacement;
    this.#numSamples = numSamples;
    this.generator = generator ?? new Generator();
  }

  get length(): number {
    return this.#numSamples ?? lengthOf(this.#source);
  }

  *[Symbol.iterator](): Iterator<number> {
    const n = lengthOf(this.#source);
    const total = this.length;
    if (n === 0) {
      if (total > 0 && this.#numSamples !== undefined) {
        throw new InvalidArgumentError(`RandomSampler cannot draw ${total} samples from an empty source.`);
      }
      return;
    }
    const g = this.generator;
    if (this.replacement) {
      for (let k = 0; k < total; k++) yield g.randint(n);
      return;
    }
    for (let left = total; left > 0; left -= n) {
      const perm = g.randperm(n);
      const take = Math.min(left, n);
      for (let k = 0; k < take; k++) yield perm[k]!;
    }
  }
}

/** The given indices in random order (torch's SubsetRandomSampler). */
export class SubsetRandomSampler implements Sampler {
  readonly indices: readonly number[];
  readonly generator: Generator;
  constructor(indices: readonly number[], options: { generator?: Generator } = {}) {
    if (!Array.isArray(indices) || !indices.every((i) => Number.isInteger(i) && i >= 0)) {
      throw new InvalidArgumentError('SubsetRandomSampler takes an array of non-negative integer indices.');
    }
    this.indices = indices;
    this.generator = options.generator ?? new Generator();
  }
  get length(): number {
    return this.indices.length;
  }
  *[Symbol.iterator](): Iterator<number> {
    for (const k of this.generator.randperm(this.indices.length)) yield this.indices[k]!;
  }
}

/** Groups another sampler's indices into arrays of `batchSize` (the last shorter unless dropLast). */
export class BatchSampler implements Sampler<number[]> {
  readonly sampler: Iterable<number>;
  readonly batchSize: number;
  readonly dropLast: boolean;

  constructor(sampler: Iterable<number>, batchSize: number, dropLast = false) {
    if (sampler === null || typeof (sampler as Partial<Iterable<number>>)?.[Symbol.iterator] !== 'function') {
      throw new InvalidArgumentError('BatchSampler wraps an iterable of indices (a sampler).');
    }
    checkBatchSize(batchSize);
    if (typeof dropLast !== 'boolean') throw new InvalidArgumentError(`dropLast must be a boolean (got ${String(dropLast)}).`);
    this.sampler = sampler;
    this.batchSize = batchSize;
    this.dropLast = dropLast;
  }

  /** Needs the inner sampler's length; undefined without one. */
  get length(): number | undefined {
    const n = (this.sampler as Sampler).length;
    if (typeof n !== 'number') return undefined;
    return this.dropLast ? Math.floor(n / this.batchSize) : Math.ceil(n / this.batchSize);
  }

  *[Symbol.iterator](): Iterator<number[]> {
    let batch: number[] = [];
    for (const i of this.sampler) {
      batch.push(i);
      if (batch.length === this.batchSize) {
        yield batch;
        batch = [];
      }
    }
    if (batch.length > 0 && !this.dropLast) yield batch;
  }
}

export function checkBatchSize(batchSize: unknown): number {
  if (typeof batchSize !== 'number' || !Number.isInteger(batchSize) || batchSize <= 0) {
    throw new InvalidArgumentError(`batchSize must be a positive integer, or null for no batching (got ${String(batchSize)}).`);
  }
  return batchSize;
}
