// The composed datasets as a DataLoader meets them (NOTE [Datasets that travel]): whether one
// can go to its workers, and building it (its targets) in the main process or in a worker.
import { DatasetNeedsTargetError } from '../../errors.js';
import { buildDataset, classify, type Dataset, type DatasetKind, type DatasetTarget } from '../dataset.js';
import { ComposedDataset } from './composed.js';
import './travel.js'; // their reductions, for the workers' start arguments

export function isComposed(x: unknown): x is ComposedDataset {
  return x instanceof ComposedDataset;
}

/** Throws ERR_TP_DATASET_NEEDS_TARGET when `d` is made over an object that cannot reach a worker. */
export function checkTravels(d: ComposedDataset): void {
  const problem = d.travelProblem(`the ${d.constructor.name}`);
  if (problem === null) return;
  throw new DatasetNeedsTargetError(
    `A DataLoader with numWorkers > 0 cannot send this ${d.constructor.name} to its workers: ${problem}, which cannot cross to ` +
      'another process. Build it over shared tensors (mp.TensorDataset), arrays, dataset targets { module, export?, args? } ' +
      'or other datasets of these classes, or use numWorkers: 0.',
  );
}

/** Builds what a loader was given (or a worker received): a composed dataset's targets, or a dataset target. */
export async function buildSource(source: ComposedDataset | DatasetTarget): Promise<{ dataset: Dataset; kind: DatasetKind }> {
  if (source instanceof ComposedDataset) {
    await source.ready();
    return classify(source, 'The dataset');
  }
  return buildDataset(source);
}
