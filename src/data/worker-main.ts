// A DataLoader worker, torch's _worker_loop (torch/utils/data/_utils/worker.py): seeded, it
// builds its replica of the dataset from the target, runs workerInit, then loads the batches
// its inbox asks for, in order, and sends each back on its channel; an error in one batch is
// sent back and the loop goes on (the main process decides). It stops when the parent
// closes its inbox (NOTE [Worker set]). The loop lets the event loop turn between batches
// (NOTE [Turning the event loop]).
import '../sharing/index.js'; // the shared allocator: collate writes into shared memory
import { END, workerMain } from '../workers/worker-port.js';
import { errorMessage } from '../process/error-payload.js';
import { defaultCollate, defaultConvert } from './collate.js';
import type { Dataset } from './dataset.js';
import { buildSource } from './datasets/source.js';
import { END as NO_MORE, closeFetcher, makeFetcher, type CollateFn, type Fetcher, type FetcherOptions } from './fetch.js';
import { Generator } from './generator.js';
import { restoreDataset, restoreIterator, snapshot, type ReplicaState } from './dataset-state.js';
import type { FromWorker, ToWorker, WorkerArgs } from './messages.js';
import { releaseTensors } from './release.js';
import { loadFunction } from './target.js';
import { loopTurner } from '../event-loop.js';
import { setWorkerInfo } from './worker-info.js';
import type { EnvName } from '../env.js';

const HOST_ENV = 'TENSORPROC_HOST_ID' satisfies EnvName;

/**
 * NOTE [Seeding Math.random]
 * torch's _worker_loop seeds Python's `random` with the worker's seed (random.seed(seed)), so
 * augmentation written with it repeats for the same loader seed and differs between workers.
 * V8 seeds Math.random once per isolate from the operating system (only a process-wide flag
 * changes that, and a worker thread may not take it), so each worker's Math.random becomes a
 * stream of its own Generator with the worker's seed, before the dataset module is imported:
 * code that took a reference to Math.random before that keeps V8's. It is this worker's own:
 * a worker thread's globals are its isolate's, and the main process's Math.random is V8's.
 * Nothing in tensorproc draws names from Math.random (segments use crypto's randomBytes).
 */
function seedMathRandom(seed: number): void {
  const stream = new Generator(seed);
  Math.random = () => stream.random();
}

function failure(task: number | null, e: unknown): FromWorker {
  const { error, trace } = errorMessage(e);
  return { kind: 'error', task, error, trace };
}

export const main = workerMain<WorkerArgs>(async ({ id: index, port, args: [spec, replica, loaderId, host] }) => {
  const id = loaderId ?? index;
  if (host !== undefined) process.env[HOST_ENV] = host;
  const seed = spec.baseSeed + id;
  seedMathRandom(seed);
  const info = { id, numWorkers: spec.numWorkers, seed, generator: new Generator(seed), dataset: null as unknown };
  setWorkerInfo(info);
  let dataset: Dataset;
  let opts: FetcherOptions;
  let fetcher: Fetcher;
  try {
    // torch: seeded, then worker_init_fn(id) with the replica already in get_worker_info().dataset.
    dataset = (await buildSource(spec.dataset)).dataset;
    setWorkerInfo({ ...info, dataset });
    if (spec.workerInit !== null) await (await loadFunction(spec.workerInit, 'workerInit target'))(id);
    const collate =
      spec.collate !== null
        ? ((await loadFunction(spec.collate, 'collate target')) as CollateFn)
        : ((spec.batchSize === null ? defaultConvert : defaultCollate) as CollateFn);
    opts = { batchSize: spec.batchSize, dropLast: spec.dropLast, collate, releaseSamples: spec.releaseSamples };
    // NOTE [Resumable datasets]: the dataset's state first, then its iterator made and loaded (torchdata's order).
    await restoreDataset(dataset, replica);
    fetcher = makeFetcher(dataset, spec.kind, opts);
    await restoreIterator(fetcher, replica);
  } catch (e) {
    port.send(failure(null, e));
    await port.flushed();
    return;
  }
  // NOTE [Collate into shared memory]: default collate's tensors are this worker's own, made
  // for the batch, so its hold is dropped once the batch is sent (the receiver holds the
  // segment now); when the main process releases the batch, the segment comes back to this
  // worker's cache and the next batch reuses it. A custom collate (or defaultConvert) may
  // return tensors the dataset keeps: those are left to the garbage collector.
  const ownsBatches = spec.collate === null && spec.batchSize !== null;
  const turn = loopTurner();
  for (;;) {
    await turn();
    const m = (await port.next()) as ToWorker | typeof END;
    if (m === END) break;
    if (m.kind === 'resume') {
      if (m.reset) {
        await closeFetcher(fetcher);
        fetcher = makeFetcher(dataset, spec.kind, opts);
      }
      port.send({ kind: 'resumed', state: snapshot(dataset, fetcher) } satisfies FromWorker);
      continue;
    }
    let data: unknown;
    let state: ReplicaState | null = null;
    const t0 = performance.now();
    try {
      data = await fetcher.fetch(m.req);
      if (data !== NO_MORE) state = snapshot(dataset, fetcher);
    } catch (e) {
      port.send(failure(m.task, e));
      continue;
    }
    if (data === NO_MORE) {
      port.send({ kind: 'end', task: m.task } satisfies FromWorker);
      continue;
    }
    try {
      port.send({ kind: 'batch', task: m.task, data, ms: performance.now() - t0, state } satisfies FromWorker);
    } catch (e) {
      port.send(failure(m.task, e)); // a batch that cannot travel (a function inside it, say)
    } finally {
      if (ownsBatches) releaseTensors(data);
    }
  }
  await closeFetcher(fetcher);
});
