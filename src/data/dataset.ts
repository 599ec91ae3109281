// Datasets: map-style ({ length, getItem }), iterable (async or sync iterables), and dataset
// targets ({ module, export?, args? }) that the main process and every worker build by a
// call, since a dataset object cannot cross to another process (torch pickles it instead).
import { DatasetNeedsTargetError, InvalidArgumentError, InvalidDatasetError } from '../errors.js';
import { loadFunction, checkTarget, type FunctionTarget } from './target.js';

/** torch's map-style Dataset: `getItem(i)` for i in [0, length) (with batchSize null, whatever the sampler yields: a list of indices for bulk loading). */
export interface MapDataset<T = unknown> {
  readonly length: number;
  getItem(index: number): T | Promise<T>;
}

/** torch's IterableDataset: each worker iterates its own replica and shards it with getWorkerInfo(). */
export type IterableDataset<T = unknown> = (AsyncIterable<T> | Iterable<T>) & { readonly length?: number };

/** A module export called with `args` (awaited) to build the dataset, in the main process and in each worker. */
export interface DatasetTarget extends FunctionTarget {
  args?: readonly unknown[];
}

export type Dataset<T = unknown> = MapDataset<T> | IterableDataset<T>;

export type DatasetKind = 'map' | 'iterable';

export function isMapDataset(x: unknown): x is MapDataset {
  return x !== null && typeof x === 'object' && typeof (x as MapDataset).getItem === 'function';
}

function isIterable(x: unknown): x is IterableDataset {
  return (
    x !== null &&
    (typeof x === 'object' || typeof x === 'function') &&
    (typeof (x as AsyncIterable<unknown>)[Symbol.asyncIterator] === 'function' ||
      typeof (x as Iterable<unknown>)[Symbol.iterator] === 'function')
  );
}

/** A dataset target, not a dataset: it names a module and has neither getItem nor an iterator. */
export function isDatasetTarget(x: unknown): x is DatasetTarget {
  return x !== null && typeof x === 'object' && 'module' in x && !isMapDataset(x) && !isIterable(x) && !Array.isArray(x);
}

/**
 * The dataset as this process uses it, and its kind. An array counts as map-style (torch
 * takes a list as a dataset); anything else must be one of the two kinds.
 */
export function classify(dataset: unknown, where: string): { dataset: Dataset; kind: DatasetKind } {
  if (Array.isArray(dataset)) {
    const a = dataset;
    return {
      dataset: {
        get length() {
          return a.length;
        },
        getItem: (i) => a[i],
      },
      kind: 'map',
    };
  }
  if (isMapDataset(dataset)) {
    const n = dataset.length;
    if (!Number.isInteger(n) || n < 0) {
      throw new InvalidDatasetError(`${where}: a map-style dataset's length must be a non-negative integer (got ${String(n)}).`);
    }
    return { dataset, kind: 'map' };
  }
  if (isIterable(dataset)) return { dataset, kind: 'iterable' };
  throw new InvalidDatasetError(
    `${where} is not a dataset: pass a map-style dataset { length, getItem(i) }, an (async) iterable, ` +
      'or a dataset target { module, export?, args? } whose export returns one.',
  );
}

/** Checks a dataset target's fields without importing anything. */
export function checkDatasetTarget(t: DatasetTarget): void {
  checkTarget(t, 'dataset target');
  if (t.args !== undefined && !Array.isArray(t.args)) {
    throw new InvalidArgumentError("A dataset target's args must be an array: the export is called as fn(...args).");
  }
}

/** Builds the dataset a target names: imports its module, calls the export with args, awaits it. */
export async function buildDataset(t: DatasetTarget): Promise<{ dataset: Dataset; kind: DatasetKind }> {
  const factory = await loadFunction(t, 'dataset target');
  const made = await factory(...(t.args ?? []));
  return classify(made, `The dataset target's export '${t.export ?? 'default'}' returned something that`);
}

/** The refusal of issue 12: objects cannot be sent to workers; the fix is a target. */
export function needsTarget(what: 'dataset' | 'collate' | 'workerInit'): DatasetNeedsTargetError {
  const example =
    what === 'dataset'
      ? "{ module: new URL('./my-dataset.js', import.meta.url), export: 'makeDataset', args: [...] }, whose export returns the dataset"
      : `{ module: new URL('./my-${what.toLowerCase()}.js', import.meta.url), export: '${what}' }`;
  return new DatasetNeedsTargetError(
    `A DataLoader with numWorkers > 0 cannot use a ${what} ${what === 'dataset' ? 'object' : 'function'}: each worker process ` +
      `builds its own from a target, since objects and functions cannot cross to another process. Pass a ${what} target ` +
      `${example}${what === 'dataset' ? ", or a dataset of tensorproc's classes over shared tensors or targets (mp.TensorDataset, Subset, ConcatDataset…), which travel to the workers; an object of this process cannot" : ''}, or numWorkers: 0.`,
  );
}

/** A cluster loader's refusal (NOTE [Cluster loader]): each agent builds the dataset from a module under cluster.root. */
export function needsModuleTarget(): DatasetNeedsTargetError {
  return new DatasetNeedsTargetError(
    "A DataLoader with `cluster` builds its dataset on each agent from a dataset target under cluster.root ({ module: 'data.js', export: 'makeDataset', args }): " +
      "datasets composed in this process (TensorDataset, Subset, ConcatDataset…) are handles to this host's memory. Wrap the composition in a module's export, or drop `cluster`.",
  );
}
