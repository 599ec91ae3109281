// torch.utils.data.ConcatDataset: map-style datasets one after another. Item i is found by
// the cumulative sizes (a binary search), negative i counting from the end, as in torch.
import { InvalidArgumentError, InvalidDatasetError } from '../../errors.js';
import type { Dataset, MapDataset } from '../dataset.js';
import { ComposedDataset, itemIndex, toPart, type Part, type DatasetSource } from './composed.js';

export class ConcatDataset<T = unknown> extends ComposedDataset implements MapDataset<T> {
  readonly parts: readonly Part[];
  readonly kind = 'map';
  #cumulative: number[] = [];

  constructor(datasets: Iterable<DatasetSource>) {
    super();
    if (datasets === null || typeof (datasets as Partial<Iterable<unknown>>)?.[Symbol.iterator] !== 'function') {
      throw new InvalidArgumentError('ConcatDataset takes an array of datasets: new mp.ConcatDataset([a, b]).');
    }
    this.parts = [...datasets].map((d, k) => toPart(d, `ConcatDataset's datasets[${k}]`));
    if (this.parts.length === 0) throw new InvalidArgumentError('ConcatDataset needs at least one dataset (got an empty array).');
    this.checkBuilt();
  }

  get datasets(): Dataset[] {
    return this.parts.map((p) => p.dataset);
  }

  /** torch's cumulative_sizes: the end of each dataset in the concatenation. */
  get cumulativeSizes(): readonly number[] {
    this.needBuilt();
    return this.#cumulative;
  }

  get length(): number {
    return this.cumulativeSizes.at(-1)!;
  }

  getItem(index: number): T | Promise<T> {
    const cum = this.cumulativeSizes;
    const i = itemIndex(index, cum.at(-1)!, 'ConcatDataset');
    // bisect_right: the first dataset whose end is past i.
    let lo = 0;
    let hi = cum.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (cum[mid]! <= i) lo = mid + 1;
      else hi = mid;
    }
    const start = lo === 0 ? 0 : cum[lo - 1]!;
    return (this.parts[lo]!.dataset as MapDataset<T>).getItem(i - start);
  }

  protected override check(): void {
    let sum = 0;
    this.#cumulative = this.parts.map((p, k) => {
      if (p.kind !== 'map') {
        throw new InvalidDatasetError(
          `ConcatDataset takes map-style datasets: datasets[${k}] is iterable. Chain iterable datasets with mp.ChainDataset.`,
        );
      }
      sum += p.length!;
      return sum;
    });
  }

  protected partName(k: number): string {
    return `datasets[${k}]`;
  }
}
