// Loading in the main process (numWorkers 0), torch's _SingleProcessDataLoaderIter. The loop
// lets the event loop turn between batches (NOTE [Turning the event loop]).

import { END, closeFetcher, type Fetcher } from './fetch.js';
import type { Epoch } from './epoch.js';
import type { ReplicaState } from './dataset-state.js';
import type { LoaderStats } from './loader-stats.js';
import { releaseTensors } from './release.js';
import { loopTurner } from '../event-loop.js';

export async function* loadInProcess(
  epoch: Epoch,
  fetcher: Fetcher,
  wrap: (b: unknown) => unknown,
  done: () => void,
  /** The dataset's state after a batch (NOTE [Resumable datasets]); null without one. */
  snapshot: () => ReplicaState | null,
  stats: LoaderStats,
): AsyncGenerator<unknown> {
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
      epoch.handedOut(planned.pos, 0, snapshot());
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
