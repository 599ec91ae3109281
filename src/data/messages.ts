// What the main process and a DataLoader worker say to each other, over the worker's own
// channel of the worker set (NOTE [Worker set], workers/worker-set.ts). Defined once here:
// workers.ts is the parent side, worker-main.ts the worker side.
import type { SerializedError } from '../process/messages.js';
import type { DatasetKind } from './dataset.js';
import type { ComposedDataset } from './datasets/composed.js';
import type { FetchRequest } from './fetch.js';
import type { ReplicaState } from './dataset-state.js';

/**
 * A worker's start arguments, with its replica's state to load (NOTE [Resumable datasets]):
 * everything it needs to build its replica and load batches. On a cluster (NOTE [Cluster
 * loader]) the loader's worker id (its index in the host's set differs) and the host's id.
 */
export type WorkerArgs = [spec: WorkerSpec, replica: ReplicaState | null, id?: number, host?: string];

/** What every worker of a loader is started with. */
export interface WorkerSpec {
  /** The dataset target, its module resolved to a file: URL by the parent, or a composed dataset (NOTE [Datasets that travel]). */
  dataset: { module: string; export: string; args: readonly unknown[] } | ComposedDataset;
  kind: DatasetKind;
  collate: { module: string; export: string } | null;
  workerInit: { module: string; export: string } | null;
  batchSize: number | null;
  dropLast: boolean;
  /** NOTE [Releasing samples]: default collate releases each sample's tensors once copied. */
  releaseSamples: boolean;
  numWorkers: number;
  /** The worker's seed is baseSeed + its id (torch). */
  baseSeed: number;
}

export type ToWorker =
  /** Load the batch `req` as task `task`. */
  | { kind: 'fetch'; task: number; req: FetchRequest }
  /**
   * A parked worker's next epoch (torch's _ResumeIteration): answer `resumed`; with `reset`,
   * an iterable dataset starts over first.
   */
  | { kind: 'resume'; reset: boolean };

export type FromWorker =
  /**
   * `ms`: the time the worker took to make it (loader.stats()); `state`: its replica's state
   * right after, when the dataset has one (NOTE [Resumable datasets]).
   */
  | { kind: 'batch'; task: number; data: unknown; ms: number; state: ReplicaState | null }
  /** An iterable dataset's replica has nothing more for task `task` (torch's _IterableDatasetStopIteration). */
  | { kind: 'end'; task: number }
  /** The answer to `resume`: this worker is alive and ready for the epoch. */
  | { kind: 'resumed'; state: ReplicaState | null }
  /** Loading task `task` threw; task null: building the dataset or workerInit did, and the worker stops. */
  | { kind: 'error'; task: number | null; error: SerializedError; trace: string };
