// Issue 9, point 5: children start with their parent's sharing strategy (spawn, Pool workers,
// DataLoader workers; Process has its own test in process.test.ts), and a child that chooses
// its own keeps it, for its own children too. Both start methods.
import { describe, it, afterEach } from 'node:test';
import assert from 'node:assert/strict';
import { checkLeaks } from '../helpers/leaks.js';
import { segmentOf } from '../helpers/segments.js';
import * as mp from '../../src/index.js';

checkLeaks();

const MODULE = new URL('./fixtures/strategy-targets.js', import.meta.url);
const target = (name: string) => ({ module: MODULE, export: name });
const TIMEOUT = { timeout: 60_000 };

afterEach(() => mp.setSharingStrategy('file_descriptor'));

for (const startMethod of ['spawn', 'thread'] as const) {
  describe(`startMethod '${startMethod}': the parent's setSharingStrategy('file_system') is the children's`, () => {
    it('spawn', TIMEOUT, async () => {
      mp.setSharingStrategy('file_system');
      const q = new mp.Queue<any>();
      try {
        await mp.startProcesses(target('spawned'), { args: [q], nprocs: 2, startMethod });
        for (let k = 0; k < 2; k++) {
          const got = await q.get({ timeout: 30_000 });
          assert.equal(got.strategy, 'file_system');
          assert.equal(segmentOf(got.t).strategy, 'file_system', 'what the child made is a named segment');
          got.t.release();
        }
      } finally {
        q.close();
      }
    });

    it('Pool workers', TIMEOUT, async () => {
      mp.setSharingStrategy('file_system');
      const pool = new mp.Pool({ processes: 2, startMethod });
      try {
        assert.deepEqual(await pool.map(target('poolTask'), [1, 2, 3, 4], { chunksize: 1 }), Array(4).fill('file_system'));
      } finally {
        pool.terminate();
        await pool.join();
      }
    });

    it('a child that chooses its own strategy keeps it, and its children start with it', TIMEOUT, async () => {
      mp.setSharingStrategy('file_system');
      const q = new mp.Queue<any>();
      try {
        await mp.startProcesses(target('chooseThenSpawn'), { args: [q, startMethod], startMethod });
        assert.equal((await q.get({ timeout: 30_000 })).strategy, 'file_descriptor');
        const grandchild = await q.get({ timeout: 30_000 });
        assert.equal(grandchild.strategy, 'file_descriptor');
        assert.equal(segmentOf(grandchild.t).strategy, 'file_descriptor');
        grandchild.t.release();
      } finally {
        q.close();
      }
    });
  });
}

it("DataLoader workers start with the parent's strategy", TIMEOUT, async () => {
  mp.setSharingStrategy('file_system');
  const loader = new mp.DataLoader(target('strategyDataset'), { batchSize: 2, numWorkers: 2 });
  try {
    const seen: number[] = [];
    for await (const batch of loader) {
      seen.push(...((batch as mp.Tensor).toArray() as number[]));
      (batch as mp.Tensor).release();
    }
    assert.deepEqual(seen, [1, 1, 1, 1]);
  } finally {
    await loader.close();
  }
});
