// Loading in the main process (numWorkers 0), torch's _SingleProcessDataLoaderIter. The loop
// lets the event loop turn between batches (NOTE [Turning the event loop]).

import { defaultCollate, defaultConvert } from './collate.js';
import type { Dataset, DatasetKind } from './dataset.js';
import { restoreDataset, restoreIterator, snapshot } from './dataset-state.js';
import type { Epoch } from './epoch.js';
import { END, closeFetcher, makeFetcher, type CollateFn } from './fetch.js';
import type { LoaderStats } from './loader-stats.js';
import type { Settings } from './options.js';
import { releaseTensors } from './release.js';
import { loadOption } from './target.js';
import { loopTurner } from '../event-loop.js';

export async function* loadInProcess(
  epoch: Epoch,
  dataset: Dataset,
  kind: DatasetKind,
  s: Settings,
  wrap: (b: unknown) => unknown,
  done: () => void,
  stats: LoaderStats,
): AsyncGenerator<unknown> {
  const collate = (await loadOption(s.collate, 'collate target')) ?? (s.batchSize === null ? defaultConvert : defaultCollate);
  // NOTE [Resumable datasets]: the dataset's state first, then its iterator made and loaded.
  await restoreDataset(dataset, epoch.restore?.[0] ?? null);
  const fetcher = makeFetcher(dataset, kind, {
    batchSize: s.batchSize,
    dropLast: s.dropLast,
    collate: collate as CollateFn,
    releaseSamples: s.releaseSamples,
  });
  await restoreIterator(fetcher, epoch.restore?.[0] ?? null);
  epoch.setReplica(0, snapshot(dataset, fetcher));
  const turn = loopTurner();
  let asked = performance.now(); // when next() began waiting (loader.stats().waitTime)
  try {
    for (; epoch.discard > 0; epoch.discard--) {
      epoch.next(); // the dropped batch's place: the next one handed out is the one after it
      const dropped = await fetcher.fetch(null);
      if (dropped === END) return done();
      releaseTensors(dropped);
    }
    for (;;) {
      const planned = epoch.next();
      if (planned === undefined) break;
      const t0 = performance.now();
      let batch: unknown;
      try {
        batch = await fetcher.fetch(planned.req);
      } catch (e) {
        stats.failed++;
        throw e;
      }
      if (batch === END) break;
      const now = performance.now();
      stats.made(-1, now - t0);
      epoch.handedOut(planned.pos, 0, snapshot(dataset, fetcher));
      stats.handedOut(-1, now - asked);
      yield wrap(batch);
      await turn();
      asked = performance.now();
    }
    done();
  } finally {
    await closeFetcher(fetcher);
  }
}
