// The errors an iteration with workers fails with, built from what a worker sent or how it
// ended (NOTE [DataLoader workers]): each names the worker, its pid and the batch.
import {
  DataLoaderWorkerError,
  DataLoaderWorkerExitedError,
  ShmFullError,
  TooManyFilesError,
  type TensorprocSystemError,
} from '../errors.js';
import type { WorkerExit } from '../workers/worker-set.js';
import { rebuildError } from '../process/error-payload.js';
import type { FetchRequest } from './fetch.js';
import type { FromWorker } from './messages.js';

type ErrorReport = Extract<FromWorker, { kind: 'error' }>;

function indicesOf(req: FetchRequest): number[] | null {
  return req === null ? null : typeof req === 'number' ? [req] : [...req];
}

function describe(reqs: readonly FetchRequest[]): string {
  const all = reqs.flatMap((r) => indicesOf(r) ?? []);
  if (all.length === 0)
    return reqs.length > 0 ? ` while loading ${reqs.length} batch${reqs.length > 1 ? 'es' : ''} of its iterable dataset` : '';
  const shown = all.length > 16 ? `${all.slice(0, 16).join(', ')}, … (${all.length} in all)` : all.join(', ');
  return ` while loading the samples of indices [${shown}]`;
}

/**
 * Shared memory or descriptors ran out in the worker: the same class and code as in the
 * main process, with what the loader can change about it.
 */
function resourceError(id: number, pid: number, report: ErrorReport): Error | null {
  const code = report.error.fields.code;
  if (code !== 'ERR_TP_SHM_FULL' && code !== 'ERR_TP_TOO_MANY_FILES') return null;
  const Cls = code === 'ERR_TP_SHM_FULL' ? ShmFullError : TooManyFilesError;
  const f = report.error.fields as { errno?: number; syscall?: string; errnoName?: string };
  const e: TensorprocSystemError = new Cls(
    `DataLoader worker ${id} (pid ${pid}): ${report.error.message} A loader keeps up to numWorkers x prefetchFactor batches ` +
      'in shared memory on their way, besides the batches you keep: lower prefetchFactor, numWorkers or batchSize, and release ' +
      'batches when done with them (for await (using batch of loader)).',
    { errno: f.errno ?? 0, syscall: f.syscall ?? 'unknown', code: f.errnoName ?? 'EUNKNOWN' },
  );
  (e as { cause?: unknown }).cause = rebuildError(report.error);
  return e;
}

/** A batch threw in worker `id` (torch: "Caught ValueError in DataLoader worker process 0."). */
export function batchError(id: number, pid: number, req: FetchRequest, report: ErrorReport): Error {
  return (
    resourceError(id, pid, report) ??
    new DataLoaderWorkerError(
      `Caught ${report.error.name} in DataLoader worker ${id} (pid ${pid})${describe([req])}.\nOriginal stack:\n${report.trace}`,
      id,
      pid,
      indicesOf(req),
      { cause: rebuildError(report.error) },
    )
  );
}

/** Building the dataset, or workerInit, threw in worker `id`. */
export function initError(id: number, pid: number | null, report: ErrorReport): Error {
  return (
    resourceError(id, pid ?? -1, report) ??
    new DataLoaderWorkerError(
      `Caught ${report.error.name} in DataLoader worker ${id} (pid ${pid ?? -1}) while building its dataset or running workerInit.\nOriginal stack:\n${report.trace}`,
      id,
      pid ?? -1,
      null,
      { cause: rebuildError(report.error) },
    )
  );
}

/** Worker `id` died holding the tasks `held` (torch: "DataLoader worker (pid X) is killed by signal: Killed."). */
export function exitError(id: number, exit: WorkerExit, held: readonly FetchRequest[]): DataLoaderWorkerExitedError {
  const how =
    exit.signalName !== null
      ? `was killed by signal ${exit.signalName}`
      : exit.pid < 0
        ? 'could not start'
        : `exited unexpectedly with code ${exit.exitCode}`;
  const restart = 'or, for a map-style dataset, set maxWorkerRestarts so that a new worker loads its batches again.';
  const hint =
    exit.signalName === 'SIGKILL'
      ? ` SIGKILL is what the kernel's out-of-memory killer sends (see dmesg): lower numWorkers or batchSize, ${restart}`
      : exit.signalName === 'SIGABRT'
        ? ' SIGABRT is how V8 ends a process whose JavaScript heap is full ("JavaScript heap out of memory" on the worker\'s stderr): ' +
          `lower batchSize, give the workers a larger heap (NODE_OPTIONS=--max-old-space-size=MiB, read when they start), ${restart}`
        : '';
  const detail = exit.error && exit.signalName === null ? `\n${exit.error.message.trim()}` : '';
  return new DataLoaderWorkerExitedError(
    `DataLoader worker ${id} (pid ${exit.pid}) ${how}${describe(held)}.${hint}${detail}`,
    id,
    exit.pid,
    exit.signalName === null ? exit.exitCode : null,
    exit.signalName,
  );
}
