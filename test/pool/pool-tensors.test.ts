// Tensors through a Pool under both sharing strategies: torch's pool case (arguments filled
// in place by the workers, results returned), result tensors made in the workers arriving as
// handles to the workers' memory, and shared inputs read without a copy.
import { describe, it, after } from 'node:test';
import assert from 'node:assert/strict';
import { checkLeaks } from '../helpers/leaks.js';
import { openPool, stopPoolsAfter, task } from './pools.js';
import { full, getSharingStrategy, setSharingStrategy, zeros, type SharingStrategy, type StartMethod, type Tensor } from 'tensorproc';

stopPoolsAfter();
checkLeaks();

const TIMEOUT = { timeout: 60_000 };
const before = getSharingStrategy();
after(() => setSharingStrategy(before));

for (const strategy of ['file_descriptor', 'file_system'] as SharingStrategy[]) {
  for (const startMethod of ['spawn', 'thread'] as StartMethod[]) {
    describe(`tensors through a pool, ${strategy}, startMethod '${startMethod}'`, () => {
      it("torch's pool case: each worker fills its buffer in place and returns a new tensor", TIMEOUT, async () => {
        setSharingStrategy(strategy);
        const pool = openPool({ processes: 2, startMethod });
        const buffers = Array.from({ length: 4 }, () => zeros([2, 2]));
        const results = await pool.map<Tensor>(task('simplePoolFill'), buffers, { chunksize: 1 });
        assert.equal(results.length, buffers.length);
        for (const r of results) {
          assert.deepEqual(r.shape, [2, 2]);
          assert.deepEqual(r.toArray(), [
            [5, 5],
            [5, 5],
          ]);
          assert.ok(r.isShared());
        }
        // Moved into shared memory when they were sent, and written by the workers there.
        for (const b of buffers) {
          assert.ok(b.isShared());
          assert.deepEqual(b.toArray(), [
            [4, 4],
            [4, 4],
          ]);
        }
        pool.close();
        await pool.join();
      });

      it('a 1 MiB tensor made in a worker arrives as a handle to its memory; a shared input is read in place', TIMEOUT, async () => {
        setSharingStrategy(strategy);
        const pool = openPool({ processes: 2, startMethod });
        const made = await pool.map<Tensor>(
          task('makeTensor'),
          Array.from({ length: 20 }, (_, i) => i),
        );
        made.forEach((t, i) => {
          assert.equal(t.numel(), 1 << 18);
          assert.ok(t.isShared());
          assert.equal((t.data as Float32Array)[0], i);
          assert.equal((t.data as Float32Array)[(1 << 18) - 1], i);
        });
        // A result sent back in is the same memory: the worker sees what this process wrote.
        made[3]!.fill(2);
        assert.equal(await pool.apply(task('sum'), [made[3]]), 2 * (1 << 18));
        const big = full([1 << 20], 0.5, { shared: true });
        assert.equal(await pool.apply(task('sum'), [big]), 0.5 * (1 << 20));
        for (const t of made) t.release();
        big.release();
        pool.close();
        await pool.join();
      });
    });
  }
}
