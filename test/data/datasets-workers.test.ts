// The datasets and samplers of torch.utils.data in a DataLoader, with 0 and 2 workers, both
// start methods: made over shared tensors, dataset targets or one another, they go to the
// workers directly (NOTE [Datasets that travel]) and give the same batches as in-process for
// the same seed; made over an object of this process, they are refused with the fix.
import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import * as mp from '../../src/index.js';
import { throwsCoded } from '../helpers/errors.js';
import { checkLeaks } from '../helpers/leaks.js';

checkLeaks();

const fixtures = new URL('./fixtures/datasets.js', import.meta.url);
const target = (name: string, ...args: unknown[]) => ({ module: fixtures, export: name, args });

const CONFIGS = [{ numWorkers: 0 }, { numWorkers: 2, startMethod: 'spawn' as const }, { numWorkers: 2, startMethod: 'thread' as const }];

/** Each batch as plain arrays (tensors read out), releasing the batches. */
async function collect(loader: AsyncIterable<unknown>): Promise<unknown[]> {
  const out: unknown[] = [];
  const plain = (v: unknown): unknown =>
    v instanceof mp.Tensor
      ? v.toArray()
      : Array.isArray(v)
        ? v.map(plain)
        : v !== null && typeof v === 'object'
          ? Object.fromEntries(Object.entries(v).map(([k, x]) => [k, plain(x)]))
          : v;
  for await (const b of loader) {
    out.push(plain(b));
    mp.releaseTensors(b);
  }
  return out;
}

/** x: float32 [n, 2] with row i = [2i, 2i+1]; y: int32 [n] with y[i] = i. */
function rows(n: number) {
  return {
    x: mp.tensor(
      Array.from({ length: n }, (_, i) => [2 * i, 2 * i + 1]),
      { dtype: 'float32' },
    ),
    y: mp.tensor(
      Array.from({ length: n }, (_, i) => i),
      { dtype: 'int32' },
    ),
  };
}

describe('torch.utils.data datasets and samplers in a DataLoader', () => {
  test('TensorDataset split by randomSplit, shuffled with a seed: the same batches with 0 and 2 workers, rows as handles', async () => {
    const { x, y } = rows(40);
    const [train, val] = mp.randomSplit(new mp.TensorDataset(x, y), [0.75, 0.25], { seed: 3 });
    assert.deepEqual([train!.length, val!.length], [30, 10]);
    const runs: unknown[][] = [];
    for (const c of CONFIGS) {
      const loader = new mp.DataLoader(train!, { batchSize: 8, shuffle: true, seed: 9, ...c });
      const e1 = await collect(loader);
      const e2 = await collect(loader);
      runs.push([e1, e2]);
      assert.equal(e1.length, 4);
      const ys = (e1 as [number[][], number[]][]).flatMap((b) => b[1]);
      assert.deepEqual(
        [...ys].sort((a, b) => a - b),
        [...train!.indices].sort((a, b) => a - b),
        'each item of the split once',
      );
      for (const [xb, yb] of e1 as [number[][], number[]][])
        assert.deepEqual(
          xb,
          yb.map((i) => [2 * i, 2 * i + 1]),
        );
      assert.notDeepEqual(e1, e2, 'the next epoch another order');
    }
    assert.deepEqual(runs[1], runs[0], 'spawned workers: as in-process');
    assert.deepEqual(runs[2], runs[0], 'worker threads: as in-process');
    assert.ok(x.isShared() && y.isShared(), "the dataset's tensors went to the workers through shared memory");
    x.release();
    y.release();
  });

  test('ConcatDataset and StackDataset over dataset targets and Subsets: each worker builds the targets', async () => {
    for (const c of CONFIGS) {
      const cd = new mp.ConcatDataset([new mp.Subset(target('squares', 10), [1, 3, 5]), target('squares', 4)]);
      const loader = new mp.DataLoader(cd, { batchSize: 2, ...c });
      await loader.ready();
      assert.equal(loader.length, 4);
      const got = (await collect(loader)) as { x: number[][]; y: number[] }[];
      assert.deepEqual(
        got.map((b) => b.y),
        [[1, 3], [5, 0], [1, 2], [3]],
        `${JSON.stringify(c)}`,
      );
      const { y } = rows(4);
      const st = new mp.StackDataset({ t: new mp.TensorDataset(y), s: target('squares', 4), tag: ['a', 'b', 'c', 'd'] });
      const stacked = (await collect(new mp.DataLoader(st, { batchSize: 4, ...c }))) as {
        t: number[][];
        s: { y: number[] };
        tag: string[];
      }[];
      assert.deepEqual(
        stacked.map((b) => [b.t, b.s.y, b.tag]),
        [[[[0, 1, 2, 3]], [0, 1, 2, 3], ['a', 'b', 'c', 'd']]],
        `${JSON.stringify(c)}`,
      );
      y.release();
    }
  });

  test('ChainDataset of iterable dataset targets: all of each, each worker its share', async () => {
    const expected = ['a0', 'a1', 'a2', 'a3', 'a4', 'b0', 'b1', 'b2'];
    for (const c of CONFIGS) {
      const chain = new mp.ChainDataset([target('tagged', 'a', 0, 5), target('tagged', 'b', 0, 3)]);
      const got = (await collect(new mp.DataLoader(chain, { batchSize: null, ...c }))) as string[];
      if (c.numWorkers === 0) assert.deepEqual(got, expected);
      else assert.deepEqual([...got].sort(), expected, `${JSON.stringify(c)}: every item once`);
    }
  });

  test('DistributedSampler as sampler and in a batchSampler: the ranks share the dataset; setEpoch; the same with workers', async () => {
    const { x, y } = rows(11);
    const ds = new mp.TensorDataset(x, y);
    const perConfig: unknown[] = [];
    for (const c of CONFIGS) {
      const ranks: number[][][] = [];
      for (const rank of [0, 1]) {
        const sampler = new mp.DistributedSampler(ds, { numReplicas: 2, rank, seed: 4 });
        const loader = new mp.DataLoader(ds, { sampler, batchSize: 3, persistentWorkers: c.numWorkers > 0, ...c });
        const e0 = ((await collect(loader)) as [number[][], number[]][]).map((b) => b[1]);
        sampler.setEpoch(1);
        const e1 = ((await collect(loader)) as [number[][], number[]][]).map((b) => b[1]);
        await loader.close();
        assert.equal(e0.flat().length, 6, 'ceil(11 / 2) each');
        assert.notDeepEqual(e0, e1, 'setEpoch: another order');
        ranks.push(e0, e1);
      }
      const epoch0 = [...ranks[0]!.flat(), ...ranks[2]!.flat()];
      assert.deepEqual(
        [...new Set(epoch0)].sort((a, b) => a - b),
        Array.from({ length: 11 }, (_, i) => i),
        'the two ranks cover the dataset (one index twice: the padding)',
      );
      const bs = new mp.BatchSampler(new mp.DistributedSampler(ds, { numReplicas: 3, rank: 2, shuffle: false, dropLast: true }), 2);
      const batches = ((await collect(new mp.DataLoader(ds, { batchSampler: bs, ...c }))) as [number[][], number[]][]).map((b) => b[1]);
      assert.deepEqual(batches, [[2, 5], [8]], 'rank 2 of 3 of 11, dropLast: places 2, 5, 8 of 0..8');
      perConfig.push(ranks);
    }
    assert.deepEqual(perConfig[1], perConfig[0]);
    assert.deepEqual(perConfig[2], perConfig[0]);
    x.release();
    y.release();
  });

  test('WeightedRandomSampler with a seed: the same batches with 0 and 2 workers; epochs continue its stream', async () => {
    const runs: unknown[] = [];
    for (const c of CONFIGS) {
      const sampler = new mp.WeightedRandomSampler([0, 1, 1, 8], 12, { seed: 5 });
      const loader = new mp.DataLoader(target('squares', 4), { sampler, batchSize: 4, persistentWorkers: c.numWorkers > 0, ...c });
      const e = [await collect(loader), await collect(loader)].map((ep) => (ep as { y: number[] }[]).flatMap((b) => b.y));
      await loader.close();
      assert.ok(!e[0]!.includes(0), 'weight 0 is never drawn');
      assert.notDeepEqual(e[0], e[1]);
      runs.push(e);
    }
    assert.deepEqual(runs[1], runs[0]);
    assert.deepEqual(runs[2], runs[0]);
  });

  test('made over an object of this process: refused with workers (ERR_TP_DATASET_NEEDS_TARGET, naming it), fine without', async () => {
    const local = { length: 3, getItem: (i: number) => i };
    const ds = new mp.ConcatDataset([[7, 8], new mp.Subset(local, [2, 0])]);
    const e = throwsCoded(() => new mp.DataLoader(ds, { numWorkers: 2 }), mp.DatasetNeedsTargetError, 'ERR_TP_DATASET_NEEDS_TARGET');
    assert.match(e.message, /ConcatDataset.*datasets\[1\]\.dataset.*object of this process/);
    assert.match(e.message, /TensorDataset/);
    const plain = throwsCoded(() => new mp.DataLoader(local, { numWorkers: 1 }), mp.DatasetNeedsTargetError, 'ERR_TP_DATASET_NEEDS_TARGET');
    assert.match(plain.message, /TensorDataset/);
    assert.deepEqual(await collect(new mp.DataLoader(ds, { batchSize: 2 })), [
      [7, 8],
      [2, 0],
    ]);
  });
});
