// Short tasks do not wait behind a busy worker (issue 24, bug 2; NOTE [Pool stealing]): with
// one worker of two held by a task that does not end until the test says so, every kind of
// call ends on the other worker, whatever the chunksize, as with CPython's single task
// queue. Without stealing, each of these calls waits for the held task and the test times
// out. Each chunk runs exactly once, stolen or not.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { checkLeaks } from '../helpers/leaks.js';
import { openPool, stopPoolsAfter, task } from './pools.js';
import { Event as MpEvent, SimpleQueue, zeros, type StartMethod } from 'tensorproc';

stopPoolsAfter();
checkLeaks();

const TIMEOUT = { timeout: 120_000 };
const range = (n: number): number[] => Array.from({ length: n }, (_, i) => i);
const squares = (n: number): number[] => range(n).map((x) => x * x);

async function collect(it: AsyncIterable<unknown>): Promise<unknown[]> {
  const out: unknown[] = [];
  for await (const v of it) out.push(v);
  return out;
}

for (const startMethod of ['spawn', 'thread'] as StartMethod[]) {
  describe(`a pool of 2 with one worker held, startMethod '${startMethod}'`, () => {
    it('map (default chunksize and 1), starmap, imap and imapUnordered end on the free worker', TIMEOUT, async () => {
      const pool = openPool({ processes: 2, startMethod });
      // Both workers ready and warm first, so that the held task goes to one of them.
      assert.deepEqual(await pool.map(task('square'), range(8), { chunksize: 1 }), squares(8));
      const started = new MpEvent();
      const release = new MpEvent();
      const held = pool.apply(task('block'), [started, release]);
      await started.wait();

      assert.deepEqual(await pool.map(task('square'), range(10)), squares(10));
      assert.deepEqual(await pool.map(task('square'), range(10), { chunksize: 1 }), squares(10));
      assert.deepEqual(await pool.map(task('square'), range(1000)), squares(1000));
      assert.deepEqual(
        await pool.starmap(
          task('add'),
          range(10).map((x) => [x, 1]),
        ),
        range(10).map((x) => x + 1),
      );
      assert.deepEqual(await collect(pool.imap(task('square'), range(10))), squares(10));
      assert.deepEqual(await collect(pool.imap(task('square'), range(100), { chunksize: 7 })), squares(100));
      // More than buffersize: chunks held by the busy worker count against it until taken back.
      assert.deepEqual(await collect(pool.imap(task('square'), range(1000))), squares(1000));
      assert.equal((await collect(pool.imapUnordered(task('square'), range(1000), { buffersize: 8 }))).length, 1000);
      const unordered = (await collect(pool.imapUnordered(task('square'), range(10)))) as number[];
      assert.deepEqual(
        unordered.sort((a, b) => a - b),
        squares(10),
      );
      assert.equal(await pool.apply(task('square'), [12]), 144);

      release.set();
      assert.equal(await held, 'released');
      // The held worker skipped what was taken from it, and goes on taking work.
      assert.deepEqual(await pool.map(task('square'), range(100), { chunksize: 1 }), squares(100));
      for (const e of [started, release]) e.close();
    });

    it('every chunk runs once, whether it was stolen or not', TIMEOUT, async () => {
      const pool = openPool({ processes: 2, startMethod });
      const started = new MpEvent();
      const release = new MpEvent();
      const pids = new SimpleQueue<[number, number]>();
      const held = pool.apply(task('block'), [started, release, pids]);
      await started.wait();
      const [heldPid, heldThread] = await pids.get();
      const counter = zeros([1], { dtype: 'int32', shared: true });
      const args = range(300).map((x) => [counter, x]);
      for (const chunksize of [1, 4, 50]) {
        (counter.data as Int32Array)[0] = 0;
        assert.deepEqual(await pool.starmap(task('count'), args, { chunksize }), range(300));
        assert.equal((counter.data as Int32Array)[0], 300, `chunksize ${chunksize}`);
      }
      // All of it ran on the free worker.
      const ran = (await pool.map(task('pid'), range(20), { chunksize: 1 })) as [number, string][];
      assert.ok(ran.every(([, who]) => who !== `${heldPid}:${heldThread}`));
      release.set();
      assert.equal(await held, 'released');
      (counter.data as Int32Array)[0] = 0;
      assert.deepEqual(await pool.starmap(task('count'), args, { chunksize: 3 }), range(300));
      assert.equal((counter.data as Int32Array)[0], 300);
      counter.release();
      for (const x of [started, release, pids]) x.close();
    });
  });
}
