// getWorkerInfo(): torch's get_worker_info(). Set once in each worker process before its
// dataset is built, null in the main process (and in an in-process loader, numWorkers 0).
import type { Generator } from './generator.js';

export interface WorkerInfo {
  /** This worker's number, 0 … numWorkers-1. */
  readonly id: number;
  readonly numWorkers: number;
  /** base seed + id (torch's seed): the same loader seed gives every worker the same seed again. */
  readonly seed: number;
  /** A generator seeded with `seed`, for augmentation that must be reproducible (Math.random cannot be seeded). */
  readonly generator: Generator;
  /** This worker's replica of the dataset, once built (null while the dataset target runs). */
  readonly dataset: unknown;
}

let current: WorkerInfo | null = null;

/** In a DataLoader worker: who it is and its seed. In any other process: null. */
export function getWorkerInfo(): WorkerInfo | null {
  return current;
}

/** Called by the worker loop only. */
export function setWorkerInfo(info: WorkerInfo | null): void {
  current = info === null ? null : Object.freeze({ ...info });
}
