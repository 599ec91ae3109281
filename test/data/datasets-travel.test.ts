// NOTE [Datasets that travel]: the composed datasets are registered types, so they travel in
// any message (a Queue here; the DataLoader's workers in datasets-workers.test.ts), tensors
// by handle, targets to be built by the receiver; one made over an object of this process is
// refused by the send, which loses nothing.
import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import * as mp from '../../src/index.js';
import { isCoded } from '../helpers/errors.js';
import { checkLeaks } from '../helpers/leaks.js';

checkLeaks();

const fixtures = new URL('./fixtures/datasets.js', import.meta.url);
const target = (name: string, ...args: unknown[]) => ({ module: fixtures, export: name, args });

describe('composed datasets in messages', () => {
  test('a tree of them round-trips through a Queue: same classes, tensors over the same storage, targets built by ready()', async () => {
    const x = mp.tensor([10, 11, 12], { dtype: 'int32' });
    const extra = mp.tensor([7, 8], { dtype: 'int32' });
    const tree = new mp.StackDataset({
      c: new mp.ConcatDataset([new mp.TensorDataset(x), new mp.Subset(target('squares', 5), [4, 1]), [{ t: extra }]]),
      s: ['a', 'b', 'c', 'd', 'e', 'f'],
    });
    await tree.ready();
    const q = new mp.Queue<mp.StackDataset>();
    await q.put(tree);
    const got = await q.get();
    q.close();
    assert.ok(got instanceof mp.StackDataset && got !== tree);
    const c = (got.datasets as Record<string, unknown>).c as mp.ConcatDataset;
    assert.ok(c instanceof mp.ConcatDataset);
    assert.ok(c.datasets[0] instanceof mp.TensorDataset);
    assert.ok(c.parts[1]!.given instanceof mp.Subset);
    assert.equal((c.datasets[0] as mp.TensorDataset).tensors[0]!.storage, x.storage, 'the same storage, not a copy');
    assert.equal(got.isBuilt, false, 'the target inside is built by the receiver');
    await got.ready();
    assert.deepEqual(got.keys, ['c', 's']);
    const items = await Promise.all(Array.from({ length: 6 }, (_, i) => got.getItem(i)));
    const plain = items.map((it) => {
      const { c: v, s } = it as { c: unknown; s: string };
      if (Array.isArray(v)) return [(v[0] as mp.Tensor).get(), s];
      const o = v as { y?: number; t?: mp.Tensor };
      return [o.y ?? (o.t as mp.Tensor).toArray(), s];
    });
    assert.deepEqual(plain, [
      [10, 'a'],
      [11, 'b'],
      [12, 'c'],
      [4, 'd'],
      [1, 'e'],
      [[7, 8], 'f'],
    ]);
    assert.equal(
      ((items[5] as { c: { t: mp.Tensor } }).c.t as mp.Tensor).storage,
      extra.storage,
      "an array part's tensors go by handle too",
    );
    x.release();
    extra.release();
  });

  test('one over an object of this process: the put is refused (ERR_TP_DATASET_NEEDS_TARGET) and the queue goes on', async () => {
    const x = mp.tensor([1, 2], { dtype: 'int32' }).shareMemory();
    const ds = new mp.ConcatDataset([new mp.TensorDataset(x), { length: 1, getItem: () => 0 }]);
    const q = new mp.Queue<unknown>();
    await assert.rejects(q.put(ds), isCoded(mp.DatasetNeedsTargetError, 'ERR_TP_DATASET_NEEDS_TARGET'));
    await q.put(new mp.TensorDataset(x));
    const back = (await q.get()) as mp.TensorDataset;
    assert.deepEqual(back.getItem(1)[0]!.get(), 2);
    q.close();
    x.release();
  });
});
