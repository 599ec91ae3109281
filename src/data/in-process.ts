// Loading in the main process (numWorkers 0), torch's _SingleProcessDataLoaderIter.
//
// NOTE [Turning the event loop]
// A dataset whose getItem is synchronous makes `for await (const b of loader)` a loop of
// microtasks only: timers, I/O and finalizers wait until it ends. Finalizers are what give a
// collected batch's segment back to the cache (NOTE [Lease buffers and the finalizer]), so
// without a turn every batch the user drops without releasing makes a new segment (measured:
// 37 ms a batch of 32x3x224x224 instead of 1.6). The loop therefore lets the event loop turn
// (setImmediate) once a millisecond of loading has passed since the last turn: batches that
// take longer pay a few microseconds each, a stream of tiny ones nothing measurable.
import { END, closeFetcher, type Fetcher } from './fetch.js';
import type { Epoch } from './epoch.js';
import { releaseTensors } from './release.js';

const TURN_MS = 1;

export async function* loadInProcess(epoch: Epoch, fetcher: Fetcher, wrap: (b: unknown) => unknown, done: () => void): AsyncGenerator<unknown> {
  let lastTurn = performance.now();
  try {
    for (; epoch.discard > 0; epoch.discard--) {
      const dropped = await fetcher.fetch(null);
      if (dropped === END) return done();
      releaseTensors(dropped);
    }
    for (;;) {
      const req = epoch.next();
      if (req === undefined) break;
      const batch = await fetcher.fetch(req);
      if (batch === END) break;
      epoch.yielded++;
      yield wrap(batch);
      if (performance.now() - lastTurn >= TURN_MS) {
        await new Promise((resolve) => setImmediate(resolve));
        lastTurn = performance.now();
      }
    }
    done();
  } finally {
    await closeFetcher(fetcher);
  }
}
