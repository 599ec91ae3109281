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
