// torch.utils.data.WeightedRandomSampler: indices 0..len(weights)-1 drawn with probability
// proportional to their weight (torch.multinomial). With replacement each draw is
// independent (an inverse-CDF lookup by binary search); without, the draws are those of
// torch's multinomial without replacement, drawn by the exponential-keys method (the
// numSamples largest weight / Exp(1) keys: Efraimidis and Spirakis), which is what torch
// computes too. Each pass continues the generator's stream: epochs differ, the same seed
// gives the same epochs.
import { InvalidArgumentError } from '../../errors.js';
import { Tensor } from '../../tensor/index.js';
import { Generator, checkSeed } from '../generator.js';
import type { Sampler } from '../sampler.js';

export interface WeightedRandomSamplerOptions {
  /** Draw with replacement (default true, as torch). */
  replacement?: boolean;
  /** Seeds the draws: the same seed gives the same epochs. Default a seed from the operating system. */
  seed?: number;
  /** Draw from this generator instead. Exclusive with seed. */
  generator?: Generator;
}

export class WeightedRandomSampler implements Sampler {
  readonly weights: Float64Array;
  readonly numSamples: number;
  readonly replacement: boolean;
  readonly generator: Generator;
  /** Cumulative weights, for draws with replacement. */
  readonly #cdf: Float64Array;

  constructor(weights: ArrayLike<number> | Iterable<number> | Tensor, numSamples: number, options: WeightedRandomSamplerOptions = {}) {
    this.weights = checkWeights(weights);
    if (typeof numSamples !== 'number' || !Number.isInteger(numSamples) || numSamples <= 0) {
      throw new InvalidArgumentError(`numSamples should be a positive integer (got ${String(numSamples)}).`);
    }
    if (options === null || typeof options !== 'object') throw new InvalidArgumentError('WeightedRandomSampler options must be an object.');
    const { replacement = true, seed, generator } = options;
    if (typeof replacement !== 'boolean') throw new InvalidArgumentError(`replacement should be a boolean (got ${String(replacement)}).`);
    if (seed !== undefined && generator !== undefined) throw new InvalidArgumentError('Pass seed or generator, not both.');
    if (generator !== undefined && !(generator instanceof Generator)) {
      throw new InvalidArgumentError('generator must be a tensorproc Generator (new mp.Generator(seed)).');
    }
    let positive = 0;
    this.#cdf = new Float64Array(this.weights.length);
    let sum = 0;
    for (let i = 0; i < this.weights.length; i++) {
      const w = this.weights[i]!;
      if (w > 0) positive++;
      sum += w;
      this.#cdf[i] = sum;
    }
    if (positive === 0) throw new InvalidArgumentError('WeightedRandomSampler: the weights sum to 0; at least one must be positive.');
    if (!replacement && numSamples > positive) {
      throw new InvalidArgumentError(
        `WeightedRandomSampler cannot draw ${numSamples} samples without replacement from ${positive} indices of positive weight: lower numSamples or set replacement: true.`,
      );
    }
    this.numSamples = numSamples;
    this.replacement = replacement;
    this.generator = generator ?? new Generator(seed === undefined ? undefined : checkSeed(seed));
  }

  get length(): number {
    return this.numSamples;
  }

  *[Symbol.iterator](): Iterator<number> {
    const g = this.generator;
    if (this.replacement) {
      const cdf = this.#cdf;
      const total = cdf[cdf.length - 1]!;
      for (let k = 0; k < this.numSamples; k++) {
        const u = g.random() * total;
        // The first index whose cumulative weight exceeds u (a zero weight is never drawn).
        let lo = 0;
        let hi = cdf.length - 1;
        while (lo < hi) {
          const mid = (lo + hi) >>> 1;
          if (cdf[mid]! > u) hi = mid;
          else lo = mid + 1;
        }
        yield lo;
      }
      return;
    }
    const w = this.weights;
    const keys = new Float64Array(w.length);
    for (let i = 0; i < w.length; i++) keys[i] = w[i]! > 0 ? w[i]! / -Math.log1p(-g.random()) : -1;
    const order = Array.from({ length: w.length }, (_, i) => i).sort((a, b) => keys[b]! - keys[a]!);
    for (let k = 0; k < this.numSamples; k++) yield order[k]!;
  }
}

function checkWeights(weights: unknown): Float64Array {
  let values: ArrayLike<number>;
  if (weights instanceof Tensor) {
    if (weights.ndim !== 1) {
      throw new InvalidArgumentError(`weights should be a 1-d sequence, but the tensor given has shape [${weights.shape.join(', ')}].`);
    }
    values = (weights.toArray() as unknown[]).map(Number);
  } else if (
    weights !== null &&
    typeof weights === 'object' &&
    (typeof (weights as Iterable<number>)[Symbol.iterator] === 'function' || typeof (weights as ArrayLike<number>).length === 'number')
  ) {
    values = Array.from(weights as ArrayLike<number>);
  } else {
    throw new InvalidArgumentError(`weights should be an array of numbers or a 1-d tensor (got ${String(weights)}).`);
  }
  const out = Float64Array.from(values as ArrayLike<number>, (x) => (typeof x === 'number' ? x : Number.NaN));
  const bad = out.findIndex((x) => !Number.isFinite(x) || x < 0);
  if (bad >= 0) throw new InvalidArgumentError(`weights[${bad}] is ${String(values[bad])}: every weight must be a finite number >= 0.`);
  if (out.length === 0) throw new InvalidArgumentError('weights is empty: there is nothing to draw.');
  return out;
}
