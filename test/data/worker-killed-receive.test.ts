// A DataLoader worker SIGKILLed in the middle of receiving a tensor its main process sent
// (issue 25): with maxWorkerRestarts the loader replaces it and the epoch ends complete, and
// the message that died with it pins nothing of the main process (NOTE [Orphans in flight],
// NOTE [Witnesses of named segments]): no segment busy after housekeeping; descriptors,
// mappings and /dev/shm back where they were.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as mp from '../../src/index.js';
import { mappedSegments, segmentCache } from '../../src/sharing/index.js';
import { holders } from '../../src/sharing/segment-header.js';
import { checkLeaks, openFds, shmSegments } from '../helpers/leaks.js';

checkLeaks();

const fixtures = new URL('./fixtures/receive-killer.js', import.meta.url);
/** Housekeeping passes to drive at most: reclaim and look, then the second look that settles. */
const PASSES = 4;

for (const strategy of ['file_descriptor', 'file_system'] as const) {
  test(`${strategy}: a worker killed mid-receive is replaced, and its message pins nothing here`, async () => {
    mp.setSharingStrategy(strategy);
    mp.emptyCache();
    const start = { fds: openFds().size, mappings: mappedSegments(), shm: shmSegments().length };
    const dir = mkdtempSync(join(tmpdir(), 'tp-killed-receive-'));
    const q = new mp.Queue<mp.Tensor>();
    try {
      const x = mp.full([1 << 16], 7, { dtype: 'int32', shared: true }); // 256 KiB: a segment of its own
      await q.put(x);
      await q.joinThread(); // in the socket, for the worker to take
      x.release();
      const loader = new mp.DataLoader(
        { module: fixtures, export: 'diesReceiving', args: [20, 9, q, join(dir, 'killed')] },
        { batchSize: 2, numWorkers: 2, maxWorkerRestarts: 1 },
      );
      const got: number[] = [];
      try {
        for await (const b of loader) {
          got.push(...((b as mp.Tensor).toArray() as number[]));
          mp.releaseTensors(b);
        }
      } finally {
        await loader.close();
      }
      assert.deepEqual(
        got,
        Array.from({ length: 20 }, (_, i) => i),
        'every batch, in order',
      );
    } finally {
      q.close();
      rmSync(dir, { recursive: true, force: true });
    }
    for (let i = 0; i < PASSES && segmentCache.busySegments().length > 0; i++) segmentCache.housekeeping();
    const busy = segmentCache.busySegments().map((s) => `total ${s.refcount()}, slots ${JSON.stringify(holders(s.header))}`);
    assert.deepEqual(busy, [], 'segments busy with nothing alive to hold them');
    mp.emptyCache();
    assert.deepEqual({ fds: openFds().size, mappings: mappedSegments(), shm: shmSegments().length }, start);
  });
}
