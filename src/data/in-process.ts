// Loading in the main process (numWorkers 0), torch's _SingleProcessDataLoaderIter. The loop
// lets the event loop turn between batches (NOTE [Turning the event loop]).

import { END, closeFetcher, type Fetcher } from './fetch.js';
import type { Epoch } from './epoch.js';
import { releaseTensors } from './release.js';
import { loopTurner } from '../event-loop.js';

export async function* loadInProcess(
  epoch: Epoch,
  fetcher: Fetcher,
  wrap: (b: unknown) => unknown,
  done: () => void,
): AsyncGenerator<unknown> {
  const turn = loopTurner();
  try {
    for (; epoch.discard > 0; epoch.discard--) {
      const dropped = await fetcher.fetch(null);
      if (dropped === END) return done();
      releaseTensors(dropped);
    }
    for (;;) {
      const planned = epoch.next();
      if (planned === undefined) break;
      const batch = await fetcher.fetch(planned.req);
      if (batch === END) break;
      epoch.handedOut(planned.pos);
      yield wrap(batch);
      await turn();
    }
    done();
  } finally {
    await closeFetcher(fetcher);
  }
}
