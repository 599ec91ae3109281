// torch.utils.data.Subset: the items of a dataset at the given indices, in their order.
import { InvalidArgumentError, InvalidDatasetError } from '../../errors.js';
import type { Dataset, MapDataset } from '../dataset.js';
import { ComposedDataset, itemIndex, toPart, type Part, type DatasetSource } from './composed.js';

export class Subset<T = unknown> extends ComposedDataset implements MapDataset<T> {
  readonly indices: readonly number[];
  readonly parts: readonly Part[];
  readonly kind = 'map';

  /**
   * `dataset`: a map-style dataset, an array, a dataset target (built by ready()) or another
   * dataset of these classes. `indices`: integers (an array or a typed array).
   */
  constructor(dataset: DatasetSource, indices: ArrayLike<number> | Iterable<number>) {
    super();
    this.indices = checkIndices(indices, 'Subset');
    this.parts = [toPart(dataset, "Subset's dataset")];
    this.checkBuilt();
  }

  /** The dataset this is a subset of (built). */
  get dataset(): Dataset {
    return this.parts[0]!.dataset;
  }

  get length(): number {
    return this.indices.length;
  }

  getItem(index: number): T | Promise<T> {
    this.needBuilt();
    const i = itemIndex(index, this.indices.length, 'Subset');
    return (this.parts[0]!.dataset as MapDataset<T>).getItem(this.indices[i]!);
  }

  protected override check(): void {
    if (this.parts[0]!.kind !== 'map') {
      throw new InvalidDatasetError('Subset takes a map-style dataset ({ length, getItem }); an iterable dataset has no indices.');
    }
  }

  protected partName(): string {
    return 'dataset';
  }
}

export function checkIndices(indices: unknown, what: string): number[] {
  const ok =
    indices !== null &&
    typeof indices === 'object' &&
    (typeof (indices as Iterable<number>)[Symbol.iterator] === 'function' || typeof (indices as ArrayLike<number>).length === 'number');
  if (!ok) throw new InvalidArgumentError(`${what} takes its indices as an array of integers (got ${String(indices)}).`);
  const out = Array.from(indices as ArrayLike<number>, Number);
  const bad = out.findIndex((i) => !Number.isSafeInteger(i));
  if (bad >= 0) throw new InvalidArgumentError(`${what}: indices[${bad}] is ${String(out[bad])}, not an integer.`);
  return out;
}
