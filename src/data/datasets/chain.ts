// torch.utils.data.ChainDataset: iterable datasets one after another, read lazily. In a
// loader's workers each part is iterated by each worker, so parts shard themselves with
// getWorkerInfo() as any iterable dataset does (torch's rule too).
import { InvalidArgumentError, InvalidDatasetError } from '../../errors.js';
import type { Dataset } from '../dataset.js';
import { ComposedDataset, toPart, type DatasetSource, type Part } from './composed.js';

export class ChainDataset<T = unknown> extends ComposedDataset implements AsyncIterable<T> {
  readonly parts: readonly Part[];
  readonly kind = 'iterable';

  /** `datasets`: iterable datasets (sync or async iterables, arrays, targets that build one). */
  constructor(datasets: Iterable<DatasetSource>) {
    super();
    if (datasets === null || typeof (datasets as Partial<Iterable<unknown>>)?.[Symbol.iterator] !== 'function') {
      throw new InvalidArgumentError('ChainDataset takes an array of iterable datasets: new mp.ChainDataset([a, b]).');
    }
    this.parts = [...datasets].map((d, k) => toPart(d, `ChainDataset's datasets[${k}]`));
    this.checkBuilt();
  }

  get datasets(): Dataset[] {
    return this.parts.map((p) => p.dataset);
  }

  /** The sum of the parts' lengths, when every part has one (undefined otherwise, as torch raises). */
  get length(): number | undefined {
    this.needBuilt();
    let sum = 0;
    for (const p of this.parts) {
      const n = p.length;
      if (n === undefined) return undefined;
      sum += n;
    }
    return sum;
  }

  async *[Symbol.asyncIterator](): AsyncIterator<T> {
    this.needBuilt();
    for (const p of this.parts) yield* (Array.isArray(p.given) ? p.given : p.dataset) as AsyncIterable<T> | Iterable<T>;
  }

  protected override check(): void {
    this.parts.forEach((p, k) => {
      if (p.kind !== 'iterable' && !Array.isArray(p.given)) {
        throw new InvalidDatasetError(
          `ChainDataset chains iterable datasets: datasets[${k}] is map-style ({ length, getItem }). Concatenate map-style datasets with mp.ConcatDataset.`,
        );
      }
    });
  }

  protected partName(k: number): string {
    return `datasets[${k}]`;
  }
}
