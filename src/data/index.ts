// Data loading (API.md, "Data loading"): torch.utils.data.
export { DataLoader } from './loader.js';
export type { DataLoaderOptions } from './options.js';
export type { DataLoaderState } from './epoch.js';
export type { DataLoaderStats, DataLoaderWorkerStats } from './loader-stats.js';
export type { Percentiles } from '../workers/stats-ring.js';
export type { Dataset, MapDataset, IterableDataset, DatasetTarget } from './dataset.js';
export { Generator } from './generator.js';
export type { GeneratorState } from './generator.js';
export { SequentialSampler, RandomSampler, SubsetRandomSampler, BatchSampler } from './sampler.js';
export type { Sampler, RandomSamplerOptions } from './sampler.js';
export { defaultCollate, defaultConvert } from './collate.js';
export { getWorkerInfo } from './worker-info.js';
export type { WorkerInfo } from './worker-info.js';
export { releaseTensors } from './release.js';
/** Internal: the DataLoader's workers on one host, for tensorproc/cluster's agents (NOTE [Cluster loader]). */
export { LoaderWorkerHost } from './worker-host.js';
export { TensorDataset } from './datasets/tensor-dataset.js';
export { Subset } from './datasets/subset.js';
export { ConcatDataset } from './datasets/concat.js';
export { ChainDataset } from './datasets/chain.js';
export { StackDataset } from './datasets/stack.js';
export { randomSplit } from './datasets/random-split.js';
export type { RandomSplitOptions } from './datasets/random-split.js';
export type { DatasetSource } from './datasets/composed.js';
export { WeightedRandomSampler } from './samplers/weighted.js';
export type { WeightedRandomSamplerOptions } from './samplers/weighted.js';
export { DistributedSampler } from './samplers/distributed.js';
export type { DistributedSamplerOptions } from './samplers/distributed.js';
import './datasets/travel.js'; // their reductions (NOTE [Datasets that travel])
