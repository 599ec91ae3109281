// A Pool worker SIGKILLed while tasks carrying tensors are in flight to it (issue 25): the task
// it ran rejects, those it held run on its replacement, and the messages that died with it pin
// nothing of this process (NOTE [Orphans in flight], NOTE [Witnesses of named segments]): no
// segment busy after housekeeping; descriptors, mappings and /dev/shm back where they were.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as mp from '../../src/index.js';
import { mappedSegments, segmentCache, type Lease } from '../../src/sharing/index.js';
import { holders } from '../../src/sharing/segment-header.js';
import { isCoded } from '../helpers/errors.js';
import { checkLeaks, openFds, shmSegments } from '../helpers/leaks.js';
import { waitFor } from '../helpers/wait.js';

checkLeaks();

const tasks = new URL('./fixtures/tensor-tasks.js', import.meta.url);
const task = (name: string) => ({ module: tasks, export: name });
/** Housekeeping passes to drive at most: reclaim and look, then the second look that settles. */
const PASSES = 4;
const refcount = (t: mp.Tensor): number => (t.storage.backing as Lease).segment.refcount();

for (const strategy of ['file_descriptor', 'file_system'] as const) {
  test(`${strategy}: a worker SIGKILLed with tensor tasks in flight to it pins nothing here`, async () => {
    mp.setSharingStrategy(strategy);
    mp.emptyCache();
    const start = { fds: openFds().size, mappings: mappedSegments(), shm: shmSegments().length };
    const pool = new mp.Pool(1);
    const started = new mp.Event();
    const release = new mp.Event();
    const pids = new mp.SimpleQueue<number>();
    try {
      const doomed = pool.apply(task('block'), [started, release, pids]);
      const pid = await pids.get();
      await started.wait();
      // 256 KiB each: segments of their own. The worker blocks; the pool sends it the first
      // of these ahead (its window), each message holding a reference to its tensor.
      const ts = Array.from({ length: 8 }, (_, i) => mp.full([1 << 16], i, { dtype: 'int32', shared: true }));
      const calls = ts.map((t) => pool.apply(task('firstOf'), [t]));
      await waitFor(() => refcount(ts[0]!) === 2); // the first is on its way to the worker
      process.kill(pid, 'SIGKILL');
      await assert.rejects(doomed, (e: unknown) => {
        isCoded(mp.ProcessExitedException, 'ERR_TP_PROCESS_EXITED')(e);
        return (e as mp.ProcessExitedException).signalName === 'SIGKILL';
      });
      // The pool goes on: what the dead worker held and had not begun runs on its replacement.
      assert.deepEqual(
        await Promise.all(calls),
        ts.map((_, i) => i),
      );
      for (const t of ts) t.release();
    } finally {
      pool.close();
      await pool.join();
      for (const x of [started, release, pids]) x.close();
    }
    for (let i = 0; i < PASSES && segmentCache.busySegments().length > 0; i++) segmentCache.housekeeping();
    const busy = segmentCache.busySegments().map((s) => `total ${s.refcount()}, slots ${JSON.stringify(holders(s.header))}`);
    assert.deepEqual(busy, [], 'segments busy with nothing alive to hold them');
    mp.emptyCache();
    assert.deepEqual({ fds: openFds().size, mappings: mappedSegments(), shm: shmSegments().length }, start);
  });
}
