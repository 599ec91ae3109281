// torch.utils.data.StackDataset: datasets of one length side by side; item i is the array of
// their items i (new StackDataset(a, b)) or an object of them by key (new StackDataset({ a, b })).
import { DatasetSizeMismatchError, InvalidArgumentError, InvalidDatasetError } from '../../errors.js';
import { isDatasetTarget, isMapDataset, type Dataset, type MapDataset } from '../dataset.js';
import { ComposedDataset, itemIndex, toPart, type Part, type DatasetSource } from './composed.js';

export class StackDataset extends ComposedDataset implements MapDataset<unknown[] | Record<string, unknown>> {
  readonly parts: readonly Part[];
  /** The keys of an object-made StackDataset (its items are objects), else null (arrays). */
  readonly keys: readonly string[] | null;
  readonly kind = 'map';

  constructor(...datasets: DatasetSource[] | [Record<string, DatasetSource>]) {
    super();
    const first = datasets[0];
    if (datasets.length === 1 && isKeyed(first)) {
      const entries = Object.entries(first as Record<string, DatasetSource>);
      if (entries.length === 0) throw new InvalidArgumentError('StackDataset needs at least one dataset (got an empty object).');
      this.keys = entries.map(([k]) => k);
      this.parts = entries.map(([k, d]) => toPart(d, `StackDataset's dataset '${k}'`));
    } else {
      if (datasets.length === 0)
        throw new InvalidArgumentError('StackDataset needs at least one dataset: new mp.StackDataset(a, b) or ({ a, b }).');
      this.keys = null;
      this.parts = (datasets as DatasetSource[]).map((d, k) => toPart(d, `StackDataset's datasets[${k}]`));
    }
    this.checkBuilt();
  }

  get datasets(): Dataset[] | Record<string, Dataset> {
    const ds = this.parts.map((p) => p.dataset);
    return this.keys === null ? ds : Object.fromEntries(this.keys.map((k, i) => [k, ds[i]]));
  }

  get length(): number {
    this.needBuilt();
    return this.parts[0]!.length!;
  }

  getItem(index: number): unknown[] | Record<string, unknown> | Promise<unknown[] | Record<string, unknown>> {
    const i = itemIndex(index, this.length, 'StackDataset');
    const items = this.parts.map((p) => (p.dataset as MapDataset).getItem(i));
    const make = (xs: unknown[]) => (this.keys === null ? xs : Object.fromEntries(this.keys.map((k, j) => [k, xs[j]])));
    return items.some((x) => x instanceof Promise) ? Promise.all(items).then(make) : make(items);
  }

  protected override check(): void {
    this.parts.forEach((p, k) => {
      if (p.kind !== 'map') throw new InvalidDatasetError(`StackDataset takes map-style datasets: ${this.partName(k)} is iterable.`);
    });
    const n = this.parts[0]!.length!;
    const bad = this.parts.findIndex((p) => p.length !== n);
    if (bad >= 0) {
      throw new DatasetSizeMismatchError(
        `Size mismatch between datasets: ${this.partName(0)} has ${n} items, ${this.partName(bad)} has ${this.parts[bad]!.length}. ` +
          'Every dataset of a StackDataset needs the same length.',
      );
    }
  }

  protected partName(k: number): string {
    return this.keys === null ? `datasets[${k}]` : `datasets.${this.keys[k]}`;
  }
}

/** A plain object of datasets, not itself a dataset, target or array. */
function isKeyed(x: unknown): boolean {
  if (x === null || typeof x !== 'object' || Array.isArray(x) || x instanceof ComposedDataset) return false;
  const proto = Object.getPrototypeOf(x);
  if (proto !== Object.prototype && proto !== null) return false;
  return (
    !isMapDataset(x) &&
    !isDatasetTarget(x) &&
    typeof (x as Iterable<unknown>)[Symbol.iterator] !== 'function' &&
    typeof (x as AsyncIterable<unknown>)[Symbol.asyncIterator] !== 'function'
  );
}
