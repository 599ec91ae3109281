// DataLoader options: checked once, with torch's rules for which ones go together
// (dataloader.py __init__), and turned into the settings the iterators use.
import { InvalidArgumentError } from '../errors.js';
import { describeValue } from '../describe-value.js';
import type { CollateFn, ConvertFn } from './fetch.js';
import { Generator, checkSeed } from './generator.js';
import { checkBatchSize } from './sampler.js';
import { checkTarget, isFunctionTarget, type FunctionTarget } from './target.js';
import { isClusterOptions, type ClusterOptions } from '../workers/cluster-entry.js';

export type StartMethod = 'spawn' | 'thread';

export interface DataLoaderOptions {
  /** Samples per batch (default 1); null: no batching, each sample goes through defaultConvert. */
  batchSize?: number | null;
  /** A new random order every epoch (map-style only). Exclusive with sampler. */
  shuffle?: boolean;
  /**
   * Indices to load, in order: any iterable of integers (a custom sampler), with `length` if
   * known. With `batchSize: null` its elements reach getItem as they are: a sampler of lists
   * of indices gives getItem one list at a time (torch's bulk loading).
   */
  sampler?: Iterable<number> | Iterable<readonly number[]>;
  /** Arrays of indices, one per batch. Exclusive with batchSize, shuffle, sampler and dropLast. */
  batchSampler?: Iterable<readonly number[]>;
  /** Drop the last batch when it is short. */
  dropLast?: boolean;
  /** Batches by default collate (NOTE [Collate into shared memory]), or this: a target (a function with numWorkers 0). */
  collate?: FunctionTarget | CollateFn | ConvertFn;
  /** Worker processes; 0 (default) loads in this process. */
  numWorkers?: number;
  /** Batches each worker works ahead (default 2); only with numWorkers > 0. */
  prefetchFactor?: number;
  /** Keep the workers between epochs (only with numWorkers > 0); close() stops them. */
  persistentWorkers?: boolean;
  /** Milliseconds to wait for a batch from the workers before failing with ERR_TP_DATALOADER_TIMEOUT; 0: no limit. */
  timeout?: number;
  /** Called as fn(workerId) in each worker once seeded and its dataset built (getWorkerInfo().dataset), before loading: a target. Unused with numWorkers 0, as in torch. */
  workerInit?: FunctionTarget | ((id: number) => unknown);
  /** Seeds the order (shuffle) and the workers' seeds: the same seed gives the same epochs. */
  seed?: number;
  /** Draw order and seeds from this generator instead (torch's `generator`). Exclusive with seed. */
  generator?: Generator;
  /** false: a batch is handed over as soon as it is ready, whatever its place (default true: sampler order). */
  inOrder?: boolean;
  /**
   * Map-style datasets with workers: how many times in one epoch a dead worker is replaced
   * and its unfinished batches sent to the new one, before the epoch fails (default 0: the
   * first death fails it, as torch does).
   */
  maxWorkerRestarts?: number;
  /** How workers start: 'spawn' (default, a process each) or 'thread' (a worker thread each). */
  startMethod?: StartMethod;
  /**
   * The samples getItem returns are the loader's: default collate releases each sample's
   * tensors once it has copied them into the batch (NOTE [Releasing samples]). For a dataset
   * that makes a fresh tensor for each sample; one that keeps or shares its samples (a cache,
   * views of one big tensor) must not set it. Needs default collate and batchSize set.
   */
  releaseSamples?: boolean;
  /** Page-lock each batch's CPU tensors in place, for fast copies to a CUDA device (src/data/pin.ts); warns once without CUDA. */
  pinMemory?: boolean;
  /**
   * Run the workers on a cluster's agents, this host's first (docs/cluster.md, NOTE [Cluster
   * loader]): the dataset is then a target whose module is under `cluster.root`, as are
   * collate's and workerInit's. Needs numWorkers > 0 and tensorproc/cluster's NATS client.
   */
  cluster?: ClusterOptions | null;
}

export interface Settings {
  batchSize: number | null;
  shuffle: boolean;
  sampler: Iterable<number> | Iterable<readonly number[]> | undefined;
  batchSampler: Iterable<readonly number[]> | undefined;
  dropLast: boolean;
  collate: FunctionTarget | CollateFn | ConvertFn | undefined;
  numWorkers: number;
  prefetchFactor: number;
  persistentWorkers: boolean;
  timeout: number;
  workerInit: FunctionTarget | ((id: number) => unknown) | undefined;
  generator: Generator;
  inOrder: boolean;
  maxWorkerRestarts: number;
  startMethod: StartMethod;
  releaseSamples: boolean;
  pinMemory: boolean;
  cluster: ClusterOptions | null;
}

const KNOWN = new Set([
  'batchSize',
  'shuffle',
  'sampler',
  'batchSampler',
  'dropLast',
  'collate',
  'numWorkers',
  'prefetchFactor',
  'persistentWorkers',
  'timeout',
  'workerInit',
  'seed',
  'generator',
  'inOrder',
  'maxWorkerRestarts',
  'startMethod',
  'releaseSamples',
  'pinMemory',
  'cluster',
]);

function bool(o: DataLoaderOptions, key: keyof DataLoaderOptions, dflt: boolean): boolean {
  const v = o[key];
  if (v === undefined) return dflt;
  if (typeof v !== 'boolean') throw new InvalidArgumentError(`${key} must be a boolean (got ${describeValue(v)}).`);
  return v;
}

function count(o: DataLoaderOptions, key: keyof DataLoaderOptions, dflt: number, min: number): number {
  const v = o[key];
  if (v === undefined) return dflt;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < min) {
    throw new InvalidArgumentError(`${key} must be an integer >= ${min} (got ${describeValue(v)}).`);
  }
  return v;
}

function iterable(x: unknown): boolean {
  return x !== null && typeof x === 'object' && typeof (x as Iterable<unknown>)[Symbol.iterator] === 'function';
}

function fnOrTarget(o: DataLoaderOptions, key: 'collate' | 'workerInit'): Settings['collate'] {
  const v = o[key];
  if (v === undefined || typeof v === 'function') return v as Settings['collate'];
  if (isFunctionTarget(v)) {
    checkTarget(v, `${key} target`);
    return v;
  }
  throw new InvalidArgumentError(`${key} must be a target { module, export? } (or, with numWorkers 0, a function).`);
}

export function parseOptions(options: DataLoaderOptions | undefined): Settings {
  if (options === undefined) options = {};
  if (options === null || typeof options !== 'object') throw new InvalidArgumentError('DataLoader options must be an object.');
  for (const k of Object.keys(options)) {
    if (!KNOWN.has(k)) throw new InvalidArgumentError(`Unknown DataLoader option '${k}'. Known options: ${[...KNOWN].join(', ')}.`);
  }
  const o = options;
  const batchSize = o.batchSize === null ? null : o.batchSize === undefined ? 1 : checkBatchSize(o.batchSize);
  const shuffle = bool(o, 'shuffle', false);
  const dropLast = bool(o, 'dropLast', false);
  const numWorkers = count(o, 'numWorkers', 0, 0);
  const persistentWorkers = bool(o, 'persistentWorkers', false);
  const inOrder = bool(o, 'inOrder', true);
  if (o.sampler !== undefined && !iterable(o.sampler))
    throw new InvalidArgumentError('sampler must be an iterable of indices (a Sampler, an array, a generator object).');
  if (o.batchSampler !== undefined && !iterable(o.batchSampler))
    throw new InvalidArgumentError('batchSampler must be an iterable of arrays of indices.');
  // torch's rules, with its reasons in the messages.
  if (o.sampler !== undefined && shuffle)
    throw new InvalidArgumentError('sampler is exclusive with shuffle: a sampler decides the order itself.');
  if (
    o.batchSampler !== undefined &&
    ((o.batchSize !== undefined && o.batchSize !== 1) || shuffle || o.sampler !== undefined || dropLast)
  ) {
    throw new InvalidArgumentError('batchSampler is exclusive with batchSize, shuffle, sampler and dropLast: it makes the batches itself.');
  }
  if (batchSize === null && dropLast)
    throw new InvalidArgumentError('batchSize null (no batching) is exclusive with dropLast: there is no last batch to drop.');
  if (numWorkers === 0 && o.prefetchFactor !== undefined)
    throw new InvalidArgumentError('prefetchFactor needs numWorkers > 0: it is how many batches each worker works ahead.');
  if (numWorkers === 0 && persistentWorkers)
    throw new InvalidArgumentError('persistentWorkers needs numWorkers > 0: there are no workers to keep.');
  const timeout = o.timeout ?? 0;
  if (typeof timeout !== 'number' || !(timeout >= 0))
    throw new InvalidArgumentError(`timeout must be a number of milliseconds >= 0 (got ${describeValue(timeout)}).`);
  if (o.seed !== undefined && o.generator !== undefined) throw new InvalidArgumentError('Pass seed or generator, not both.');
  if (o.generator !== undefined && !(o.generator instanceof Generator))
    throw new InvalidArgumentError('generator must be a tensorproc Generator (new mp.Generator(seed)).');
  const generator = o.generator ?? new Generator(o.seed === undefined ? undefined : checkSeed(o.seed));
  const startMethod = o.startMethod ?? 'spawn';
  const releaseSamples = bool(o, 'releaseSamples', false);
  if (releaseSamples && (batchSize === null || o.collate !== undefined)) {
    throw new InvalidArgumentError(
      "releaseSamples needs batches made by default collate (batchSize set, no collate): it releases each sample's tensors once default collate has copied them into the batch.",
    );
  }
  if (startMethod !== 'spawn' && startMethod !== 'thread')
    throw new InvalidArgumentError(`startMethod must be 'spawn' or 'thread' (got ${describeValue(startMethod)}).`);
  const cluster = o.cluster ?? null;
  if (cluster !== null && !isClusterOptions(cluster))
    throw new InvalidArgumentError("cluster must be { servers: 'nats://host:4222' | string[], root? } (docs/cluster.md).");
  if (cluster !== null && numWorkers === 0)
    throw new InvalidArgumentError('cluster needs numWorkers > 0: it places the workers on the agents, and numWorkers 0 has none.');
  return {
    cluster,
    batchSize: o.batchSampler !== undefined ? 1 : batchSize,
    shuffle,
    sampler: o.sampler,
    batchSampler: o.batchSampler,
    dropLast,
    collate: fnOrTarget(o, 'collate'),
    numWorkers,
    prefetchFactor: count(o, 'prefetchFactor', 2, 1),
    persistentWorkers,
    timeout,
    workerInit: fnOrTarget(o, 'workerInit') as Settings['workerInit'],
    generator,
    inOrder,
    maxWorkerRestarts: count(o, 'maxWorkerRestarts', 0, 0),
    startMethod,
    releaseSamples,
    pinMemory: bool(o, 'pinMemory', false),
  };
}

/** The rules that depend on the dataset's kind, known once a dataset target is built. */
export function checkKind(s: Settings, kind: 'map' | 'iterable'): void {
  if (kind === 'iterable' && (s.shuffle || s.sampler !== undefined || s.batchSampler !== undefined)) {
    throw new InvalidArgumentError(
      'An iterable dataset decides its own order: shuffle, sampler and batchSampler are for map-style datasets ({ length, getItem }).',
    );
  }
}
