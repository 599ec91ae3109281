// torch.utils.data.random_split: a random partition of a dataset into Subsets of given
// lengths, or of given fractions of its length (floored, then the remainder handed out one
// by one from the first split on, as torch does). An empty split is allowed (torch warns).
import { InvalidArgumentError } from '../../errors.js';
import { Generator, checkSeed } from '../generator.js';
import type { DatasetSource } from './composed.js';
import { Subset } from './subset.js';

export interface RandomSplitOptions {
  /** The same seed gives the same split; default a seed from the operating system. */
  seed?: number;
  /** Draw the permutation from this generator instead (torch's `generator`). Exclusive with seed. */
  generator?: Generator;
}

/** The lengths of the splits, as torch's random_split computes them (fractions when they sum to 1). */
export function splitLengths(n: number, lengths: readonly number[]): number[] {
  if (!Array.isArray(lengths) || lengths.length === 0 || !lengths.every((x) => typeof x === 'number' && Number.isFinite(x))) {
    throw new InvalidArgumentError('randomSplit takes a non-empty array of lengths (integers) or fractions (summing to 1).');
  }
  const sum = lengths.reduce((a, b) => a + b, 0);
  let out: number[];
  // torch: math.isclose(sum(lengths), 1) and sum(lengths) <= 1 (isclose's default rel_tol 1e-9).
  if (Math.abs(sum - 1) <= 1e-9 * Math.max(1, Math.abs(sum)) && sum <= 1) {
    out = lengths.map((f, i) => {
      if (f < 0 || f > 1) throw new InvalidArgumentError(`randomSplit: fraction at index ${i} is ${f}, not between 0 and 1.`);
      return Math.floor(n * f);
    });
    const remainder = n - out.reduce((a, b) => a + b, 0);
    for (let i = 0; i < remainder; i++) out[i % out.length]! += 1;
  } else {
    const bad = lengths.findIndex((x) => !Number.isInteger(x) || x < 0);
    if (bad >= 0) {
      throw new InvalidArgumentError(
        `randomSplit: lengths[${bad}] is ${lengths[bad]}; give non-negative integer lengths, or fractions that sum to 1 (these sum to ${sum}).`,
      );
    }
    out = lengths.slice();
  }
  const total = out.reduce((a, b) => a + b, 0);
  if (total !== n) {
    throw new InvalidArgumentError(
      `randomSplit: the lengths sum to ${total}, but the dataset has ${n} items. Give lengths that sum to its length, or fractions that sum to 1.`,
    );
  }
  return out;
}

/** torch's random_split: Subsets of `dataset` over one random permutation of its indices. */
export function randomSplit<T = unknown>(
  dataset: DatasetSource,
  lengths: readonly number[],
  options: RandomSplitOptions = {},
): Subset<T>[] {
  const n = (dataset as { length?: unknown }).length;
  if (typeof n !== 'number' || !Number.isInteger(n) || n < 0) {
    throw new InvalidArgumentError(
      'randomSplit needs a dataset with a length (an array, a map-style dataset, or a built dataset of these classes).',
    );
  }
  const sizes = splitLengths(n, lengths);
  if (options === null || typeof options !== 'object') throw new InvalidArgumentError('randomSplit options must be an object.');
  const { seed, generator } = options;
  if (seed !== undefined && generator !== undefined) throw new InvalidArgumentError('Pass seed or generator, not both.');
  if (generator !== undefined && !(generator instanceof Generator)) {
    throw new InvalidArgumentError('generator must be a tensorproc Generator (new mp.Generator(seed)).');
  }
  const g = generator ?? new Generator(seed === undefined ? undefined : checkSeed(seed));
  const perm = g.randperm(n);
  const out: Subset<T>[] = [];
  let offset = 0;
  for (const len of sizes) {
    out.push(new Subset<T>(dataset, perm.slice(offset, offset + len)));
    offset += len;
  }
  return out;
}
