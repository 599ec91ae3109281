// The datasets of torch.utils.data (TensorDataset, Subset, ConcatDataset, ChainDataset,
// StackDataset, randomSplit) in one process: lengths, items and split sizes against what
// torch gives on the same inputs (computed by torch when a python3 with it is here), and the
// errors a user can cause, each with its class and code.
import { test, describe, before } from 'node:test';
import assert from 'node:assert/strict';
import * as mp from '../../src/index.js';
import { isCoded, throwsCoded } from '../helpers/errors.js';
import { checkLeaks } from '../helpers/leaks.js';
import { NO_TORCH, torchReference } from './fixtures/torch-reference.js';

checkLeaks();

const fixtures = new URL('./fixtures/datasets.js', import.meta.url);
const target = (name: string, ...args: unknown[]) => ({ module: fixtures, export: name, args });

const SCRIPT = `
import json, torch, warnings
from torch.utils.data import TensorDataset, Subset, ConcatDataset, ChainDataset, IterableDataset, random_split
out = {}
x = torch.arange(20, dtype=torch.float32).reshape(10, 2)
y = torch.arange(10, dtype=torch.int32)
td = TensorDataset(x, y)
out['tensor'] = {'len': len(td), 'items': [[t.tolist() for t in td[i]] for i in [0, 3, 9, -1, -10]]}
sub = Subset(td, [9, 0, 4, 4])
out['subset'] = {'len': len(sub), 'items': [sub[i][1].item() for i in [0, 1, 2, 3, -1, -4]]}
parts = [['a%d' % i for i in range(3)], [], ['c%d' % i for i in range(5)], ['d0', 'd1']]
cd = ConcatDataset(parts)
out['concat'] = {'cumulative': cd.cumulative_sizes, 'len': len(cd), 'items': [cd[i] for i in range(-10, 10)]}
class It(IterableDataset):
    def __init__(self, xs): self.xs = xs
    def __iter__(self): return iter(self.xs)
    def __len__(self): return len(self.xs)
ch = ChainDataset([It(['p0', 'p1']), It([]), It(['r0'])])
out['chain'] = {'items': list(ch), 'len': len(ch)}
splits = []
warnings.simplefilter('ignore')
for n in [0, 1, 2, 7, 10, 11, 100, 101, 1000]:
    for ls in [[0.7, 0.3], [0.5, 0.25, 0.25], [1/3, 1/3, 1/3], [0.1] * 10, [0.9, 0.1, 0.0], [1.0], [0.05, 0.95], [n], [n // 2, n - n // 2]]:
        s = random_split(range(n), ls, generator=torch.Generator().manual_seed(0))
        splits.append({'n': n, 'lengths': ls, 'sizes': [len(p) for p in s]})
out['splits'] = splits
bad = []
for n, ls in [(10, [3, 3]), (10, [0.5, 0.6]), (10, [0.6, 0.6, -0.2])]:
    try:
        random_split(range(n), ls); bad.append(None)
    except ValueError as e:
        bad.append(str(e))
out['badSplits'] = bad
print(json.dumps(out))
`;

interface Reference {
  tensor: { len: number; items: [number[], number][] };
  subset: { len: number; items: number[] };
  concat: { cumulative: number[]; len: number; items: string[] };
  chain: { items: string[]; len: number };
  splits: { n: number; lengths: number[]; sizes: number[] }[];
  badSplits: (string | null)[];
}

const INDICES = [0, 3, 9, -1, -10];
const SUBSET_AT = [0, 1, 2, 3, -1, -4];
const CONCAT_PARTS = [['a0', 'a1', 'a2'], [], ['c0', 'c1', 'c2', 'c3', 'c4'], ['d0', 'd1']];
/** torch's values for these inputs, checked into the test for machines without torch (the same script printed them). */
const KNOWN = {
  concat: { cumulative: [3, 3, 8, 10], len: 10 },
  subset: [9, 0, 4, 4, 4, 9],
};

function rows(n: number) {
  const x = mp.tensor(
    Array.from({ length: n }, (_, i) => [2 * i, 2 * i + 1]),
    { dtype: 'float32' },
  );
  const y = mp.tensor(
    Array.from({ length: n }, (_, i) => i),
    { dtype: 'int32' },
  );
  return { x, y };
}

describe('datasets as torch.utils.data', () => {
  let ref: Reference | null = null;
  before(() => {
    ref = torchReference(SCRIPT) as Reference | null;
  });

  test('TensorDataset: item i is the i-th row of each tensor (views), negative i from the end', (t) => {
    const { x, y } = rows(10);
    const ds = new mp.TensorDataset(x, y);
    assert.equal(ds.length, 10);
    const items = INDICES.map((i) => ds.getItem(i).map((v) => v.toArray()));
    assert.deepEqual(items.slice(0, 2), [
      [[0, 1], 0],
      [[6, 7], 3],
    ]);
    assert.equal(ds.getItem(4)[0]!.storage, x.storage, 'a row is a view of the tensor, not a copy');
    throwsCoded(() => ds.getItem(10), mp.IndexOutOfRangeError, 'ERR_TP_INDEX_OUT_OF_RANGE');
    throwsCoded(() => ds.getItem(-11), mp.IndexOutOfRangeError, 'ERR_TP_INDEX_OUT_OF_RANGE');
    if (ref === null) t.diagnostic(NO_TORCH);
    else assert.deepEqual({ len: ds.length, items }, ref.tensor);
  });

  test('Subset: its indices in order, repeats allowed, negative from the end', (t) => {
    const { x, y } = rows(10);
    const sub = new mp.Subset(new mp.TensorDataset(x, y), [9, 0, 4, 4]);
    const items = SUBSET_AT.map((i) => (sub.getItem(i) as mp.Tensor[])[1]!.get());
    assert.deepEqual(items, KNOWN.subset);
    assert.equal(sub.length, 4);
    if (ref === null) t.diagnostic(NO_TORCH);
    else assert.deepEqual({ len: sub.length, items }, ref.subset);
    assert.deepEqual(new mp.Subset(['a', 'b', 'c'], Int32Array.of(2, 0)).getItem(0), 'c');
  });

  test('ConcatDataset: cumulative sizes, items across the parts (empty ones too), negative indices', (t) => {
    const cd = new mp.ConcatDataset(CONCAT_PARTS);
    assert.deepEqual(cd.cumulativeSizes, KNOWN.concat.cumulative);
    assert.equal(cd.length, KNOWN.concat.len);
    const items = Array.from({ length: 20 }, (_, k) => cd.getItem(k - 10));
    assert.deepEqual(items.slice(10), ['a0', 'a1', 'a2', 'c0', 'c1', 'c2', 'c3', 'c4', 'd0', 'd1']);
    // torch: IndexError past the end, ValueError below -length; both out of range here.
    throwsCoded(() => cd.getItem(10), mp.IndexOutOfRangeError, 'ERR_TP_INDEX_OUT_OF_RANGE');
    throwsCoded(() => cd.getItem(-11), mp.IndexOutOfRangeError, 'ERR_TP_INDEX_OUT_OF_RANGE');
    if (ref === null) t.diagnostic(NO_TORCH);
    else assert.deepEqual({ cumulative: cd.cumulativeSizes, len: cd.length, items }, ref.concat);
  });

  test('ChainDataset: iterable datasets one after another; its length the sum of theirs', async (t) => {
    function* gen() {
      yield 'r0';
    }
    const ch = new mp.ChainDataset([['p0', 'p1'], (async function* () {})(), Object.assign(gen(), { length: 1 })]);
    const items: unknown[] = [];
    for await (const v of ch) items.push(v);
    assert.deepEqual(items, ['p0', 'p1', 'r0']);
    assert.equal(ch.length, undefined, 'a part without a length: no length (torch raises)');
    const sized = new mp.ChainDataset([['p0', 'p1'], [], ['r0']]);
    assert.equal(sized.length, 3);
    if (ref === null) t.diagnostic(NO_TORCH);
    else assert.deepEqual({ items, len: sized.length }, ref.chain);
  });

  test('StackDataset: arrays of the items of each dataset, or objects by key', async () => {
    const { x, y } = rows(4);
    const st = new mp.StackDataset(new mp.TensorDataset(x), ['a', 'b', 'c', 'd']);
    assert.equal(st.length, 4);
    const [row, tag] = st.getItem(-1) as [mp.Tensor[], string];
    assert.deepEqual([row[0]!.toArray(), tag], [[6, 7], 'd']);
    const keyed = new mp.StackDataset({ y: new mp.TensorDataset(y), n: { length: 4, getItem: async (i: number) => i * 10 } });
    const item = (await keyed.getItem(2)) as { y: mp.Tensor[]; n: number };
    assert.deepEqual([Object.keys(item), item.y[0]!.get(), item.n], [['y', 'n'], 2, 20]);
    assert.deepEqual(keyed.keys, ['y', 'n']);
  });

  test('randomSplit: sizes as torch for lengths and for fractions; the same seed, the same split', (t) => {
    const cases = ref?.splits ?? [
      { n: 10, lengths: [0.7, 0.3], sizes: [7, 3] },
      { n: 11, lengths: [1 / 3, 1 / 3, 1 / 3], sizes: [4, 4, 3] },
      { n: 101, lengths: [0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1], sizes: [11, 10, 10, 10, 10, 10, 10, 10, 10, 10] },
      { n: 2, lengths: [0.9, 0.1, 0.0], sizes: [1, 1, 0] },
    ];
    if (ref === null) t.diagnostic(`${NO_TORCH}: checked against sizes torch gave once`);
    for (const c of cases) {
      const data = Array.from({ length: c.n }, (_, i) => i);
      const parts = mp.randomSplit(data, c.lengths, { seed: 5 });
      assert.deepEqual(
        parts.map((p) => p.length),
        c.sizes,
        `n ${c.n}, lengths ${JSON.stringify(c.lengths)}`,
      );
      const all = parts.flatMap((p) => p.indices).sort((a, b) => a - b);
      assert.deepEqual(all, data, 'the splits partition the indices');
      const again = mp.randomSplit(data, c.lengths, { seed: 5 });
      assert.deepEqual(
        again.map((p) => p.indices),
        parts.map((p) => p.indices),
      );
    }
    const a = mp.randomSplit(
      Array.from({ length: 50 }, (_, i) => i),
      [25, 25],
      { seed: 1 },
    );
    const b = mp.randomSplit(
      Array.from({ length: 50 }, (_, i) => i),
      [25, 25],
      { seed: 2 },
    );
    assert.notDeepEqual(a[0]!.indices, b[0]!.indices, 'another seed, another split');
    const g = new mp.Generator(1);
    assert.deepEqual(mp.randomSplit(Array(50).fill(0), [25, 25], { generator: g })[0]!.indices, a[0]!.indices);
  });

  test('randomSplit refuses what torch refuses', (t) => {
    const bad: [number, number[]][] = [
      [10, [3, 3]],
      [10, [0.5, 0.6]],
      [10, [0.6, 0.6, -0.2]],
    ];
    for (const [n, lengths] of bad) {
      throwsCoded(() => mp.randomSplit(Array(n).fill(0), lengths), mp.InvalidArgumentError, 'ERR_TP_INVALID_ARGUMENT');
    }
    if (ref === null) t.diagnostic(NO_TORCH);
    else
      assert.ok(
        ref.badSplits.every((m) => m !== null),
        'torch refuses them too',
      );
    throwsCoded(() => mp.randomSplit(Array(4).fill(0), [2, 2], { seed: -1 }), mp.InvalidArgumentError, 'ERR_TP_INVALID_ARGUMENT');
    throwsCoded(() => mp.randomSplit(target('squares', 4), [2, 2]), mp.InvalidArgumentError, 'ERR_TP_INVALID_ARGUMENT');
  });

  test('errors: sizes that differ, nothing given, the wrong kind of dataset, bad indices', () => {
    const { x, y } = rows(3);
    const short = mp.zeros([2]);
    throwsCoded(() => new mp.TensorDataset(x, short), mp.DatasetSizeMismatchError, 'ERR_TP_DATASET_SIZE_MISMATCH');
    throwsCoded(() => new mp.TensorDataset(), mp.InvalidArgumentError, 'ERR_TP_INVALID_ARGUMENT');
    throwsCoded(() => new mp.TensorDataset(mp.zeros([])), mp.InvalidArgumentError, 'ERR_TP_INVALID_ARGUMENT');
    throwsCoded(() => new mp.TensorDataset([1, 2] as never), mp.InvalidArgumentError, 'ERR_TP_INVALID_ARGUMENT');
    throwsCoded(() => new mp.StackDataset([1, 2, 3], [1, 2]), mp.DatasetSizeMismatchError, 'ERR_TP_DATASET_SIZE_MISMATCH');
    throwsCoded(() => new mp.StackDataset(), mp.InvalidArgumentError, 'ERR_TP_INVALID_ARGUMENT');
    throwsCoded(() => new mp.StackDataset({}), mp.InvalidArgumentError, 'ERR_TP_INVALID_ARGUMENT');
    throwsCoded(() => new mp.ConcatDataset([]), mp.InvalidArgumentError, 'ERR_TP_INVALID_ARGUMENT');
    const iterable = (async function* () {})();
    throwsCoded(() => new mp.ConcatDataset([[1], iterable]), mp.InvalidDatasetError, 'ERR_TP_INVALID_DATASET');
    throwsCoded(() => new mp.ChainDataset([{ length: 1, getItem: () => 0 }]), mp.InvalidDatasetError, 'ERR_TP_INVALID_DATASET');
    throwsCoded(() => new mp.Subset(iterable, [0]), mp.InvalidDatasetError, 'ERR_TP_INVALID_DATASET');
    throwsCoded(() => new mp.Subset([1, 2], [0, 1.5]), mp.InvalidArgumentError, 'ERR_TP_INVALID_ARGUMENT');
    throwsCoded(() => new mp.Subset([1, 2], 3 as never), mp.InvalidArgumentError, 'ERR_TP_INVALID_ARGUMENT');
    throwsCoded(() => new mp.Subset(42 as never, [0]), mp.InvalidDatasetError, 'ERR_TP_INVALID_DATASET');
    throwsCoded(() => new mp.Subset([1, 2], [0]).getItem(1), mp.IndexOutOfRangeError, 'ERR_TP_INDEX_OUT_OF_RANGE');
    x.release();
    y.release();
    short.release();
  });

  test('over a dataset target: built by ready(), its length waits for it until then', async () => {
    const cd = new mp.ConcatDataset([target('squares', 3), new mp.Subset(target('squares', 5), [4, 2])]);
    assert.equal(cd.isBuilt, false);
    throwsCoded(() => cd.length, mp.NoLengthError, 'ERR_TP_NO_LENGTH');
    throwsCoded(() => cd.getItem(0), mp.NoLengthError, 'ERR_TP_NO_LENGTH');
    assert.equal(await cd.ready(), cd);
    assert.equal(cd.length, 5);
    assert.deepEqual(
      [0, 3, 4].map((i) => (cd.getItem(i) as { y: number }).y),
      [0, 4, 2],
    );
    const mismatch = new mp.StackDataset(target('squares', 3), target('squares', 4));
    await assert.rejects(mismatch.ready(), isCoded(mp.DatasetSizeMismatchError, 'ERR_TP_DATASET_SIZE_MISMATCH'));
  });
});
