// torch.utils.data.distributed.DistributedSampler: each of numReplicas processes (ranks)
// takes its share of the dataset, every rank the same number of indices. The order is the
// same on every rank (shuffled from seed + epoch, so setEpoch() gives a new order, the same
// on all of them); without dropLast it is padded by repeating indices from its start up to a
// multiple of numReplicas, with dropLast its tail is cut to one; rank r takes every
// numReplicas-th index from place r.
import { InvalidArgumentError } from '../../errors.js';
import { Generator, checkSeed } from '../generator.js';
import type { Sampler, SizedSource } from '../sampler.js';

export interface DistributedSamplerOptions {
  /** How many processes share the dataset (torch's num_replicas). */
  numReplicas: number;
  /** This process's place among them, in [0, numReplicas). */
  rank: number;
  /** Shuffle each epoch (default true). */
  shuffle?: boolean;
  /** The shuffle's seed, which must be the same on every rank (default 0). */
  seed?: number;
  /** Cut the tail so it divides evenly, instead of padding (default false). */
  dropLast?: boolean;
}

export class DistributedSampler implements Sampler {
  readonly #source: SizedSource;
  readonly numReplicas: number;
  readonly rank: number;
  readonly shuffle: boolean;
  readonly seed: number;
  readonly dropLast: boolean;
  #epoch = 0;

  constructor(datasetOrLength: SizedSource, options: DistributedSamplerOptions) {
    sizeOf(datasetOrLength);
    this.#source = datasetOrLength;
    if (options === null || typeof options !== 'object') {
      throw new InvalidArgumentError('DistributedSampler needs options { numReplicas, rank }: this process is one of numReplicas.');
    }
    const { numReplicas, rank, shuffle = true, seed = 0, dropLast = false } = options;
    if (typeof numReplicas !== 'number' || !Number.isInteger(numReplicas) || numReplicas < 1) {
      throw new InvalidArgumentError(`numReplicas must be a positive integer (got ${String(numReplicas)}).`);
    }
    if (typeof rank !== 'number' || !Number.isInteger(rank) || rank < 0 || rank >= numReplicas) {
      throw new InvalidArgumentError(`Invalid rank ${String(rank)}, rank should be in the interval [0, ${numReplicas - 1}].`);
    }
    if (typeof shuffle !== 'boolean') throw new InvalidArgumentError(`shuffle must be a boolean (got ${String(shuffle)}).`);
    if (typeof dropLast !== 'boolean') throw new InvalidArgumentError(`dropLast must be a boolean (got ${String(dropLast)}).`);
    this.numReplicas = numReplicas;
    this.rank = rank;
    this.shuffle = shuffle;
    this.seed = checkSeed(seed);
    this.dropLast = dropLast;
  }

  /** The epoch the next pass shuffles for (torch's set_epoch): call it before each epoch, with the same value on every rank. */
  setEpoch(epoch: number): void {
    checkSeed(epoch, 'epoch');
    checkSeed(this.seed + epoch, 'seed + epoch');
    this.#epoch = epoch;
  }

  get epoch(): number {
    return this.#epoch;
  }

  /** Indices each rank takes per pass (torch's num_samples). */
  get numSamples(): number {
    const n = sizeOf(this.#source);
    const r = this.numReplicas;
    // torch: with drop_last and a remainder, ceil((n - r) / r), i.e. floor(n / r).
    return this.dropLast && n % r !== 0 ? Math.max(0, Math.ceil((n - r) / r)) : Math.ceil(n / r);
  }

  /** Indices of all ranks together per pass (torch's total_size). */
  get totalSize(): number {
    return this.numSamples * this.numReplicas;
  }

  get length(): number {
    return this.numSamples;
  }

  *[Symbol.iterator](): Iterator<number> {
    const n = sizeOf(this.#source);
    const total = this.totalSize;
    let indices = this.shuffle ? new Generator(this.seed + this.#epoch).randperm(n) : Array.from({ length: n }, (_, i) => i);
    if (this.dropLast) {
      indices = indices.slice(0, total);
    } else {
      const padding = total - indices.length;
      for (let k = 0; k < padding; k++) indices.push(indices[k % n]!);
    }
    for (let i = this.rank; i < total; i += this.numReplicas) yield indices[i]!;
  }
}

function sizeOf(source: unknown): number {
  const n = typeof source === 'number' ? source : (source as { length?: unknown } | null)?.length;
  if (typeof n !== 'number' || !Number.isInteger(n) || n < 0) {
    throw new InvalidArgumentError(`DistributedSampler draws from a length or a dataset with one (got ${String(n ?? source)}).`);
  }
  return n;
}
