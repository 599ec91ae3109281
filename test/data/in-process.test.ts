// The DataLoader loading in this process (numWorkers 0): order, shuffle, dropLast, batchSize
// null, samplers, iterable datasets, dataset targets, custom collate, options refused with
// torch's rules, length, getWorkerInfo, disposable batches, and resuming with stateDict.
import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import * as mp from '../../src/index.js';
import { isCoded, throwsCoded } from '../helpers/errors.js';
import { checkLeaks } from '../helpers/leaks.js';

checkLeaks();

const fixtures = new URL('./fixtures/datasets.js', import.meta.url);
const target = (name: string, ...args: unknown[]) => ({ module: fixtures, export: name, args });
const squares = (n: number) => ({ length: n, getItem: (i: number) => ({ x: mp.full([3], i), y: i }) });

type Sq = { x: mp.Tensor; y: mp.Tensor };
async function ys(loader: AsyncIterable<unknown>): Promise<number[][]> {
  const out: number[][] = [];
  for await (const b of loader) {
    out.push((b as Sq).y.toArray() as number[]);
    mp.releaseTensors(b);
  }
  return out;
}

describe('DataLoader, numWorkers 0', () => {
  test('batches in sampler order, the last one short; dropLast drops it; length agrees', async () => {
    const loader = new mp.DataLoader(squares(10), { batchSize: 4 });
    assert.equal(loader.length, 3);
    assert.deepEqual(await ys(loader), [
      [0, 1, 2, 3],
      [4, 5, 6, 7],
      [8, 9],
    ]);
    const dl = new mp.DataLoader(squares(10), { batchSize: 4, dropLast: true });
    assert.equal(dl.length, 2);
    assert.deepEqual(await ys(dl), [
      [0, 1, 2, 3],
      [4, 5, 6, 7],
    ]);
  });

  test('a batch is the default collate of its samples: tensors stacked in shared memory', async () => {
    for await (const b of new mp.DataLoader(squares(4), { batchSize: 2 })) {
      const { x, y } = b as Sq;
      assert.deepEqual(x.shape, [2, 3]);
      assert.ok(x.isShared());
      assert.equal(y.dtype, 'int32');
      const i = y.get(1) as number;
      assert.deepEqual(x.select(0, 1).toArray(), [i, i, i]);
      mp.releaseTensors(b);
    }
  });

  test('shuffle: every index once per epoch, epochs differ, the same seed gives the same epochs', async () => {
    const run = async (seed: number) => {
      const loader = new mp.DataLoader(squares(50), { batchSize: 7, shuffle: true, seed });
      return [(await ys(loader)).flat(), (await ys(loader)).flat()];
    };
    const [a1, a2] = await run(11);
    assert.deepEqual(
      [...a1!].sort((x, y) => x - y),
      Array.from({ length: 50 }, (_, i) => i),
    );
    assert.deepEqual(
      [...a2!].sort((x, y) => x - y),
      Array.from({ length: 50 }, (_, i) => i),
    );
    assert.notDeepEqual(a1, a2);
    assert.deepEqual(await run(11), [a1, a2]);
    assert.notDeepEqual((await run(12))[0], a1);
    const g = new mp.Generator(11);
    const withGen = new mp.DataLoader(squares(50), { batchSize: 7, shuffle: true, generator: g });
    assert.deepEqual((await ys(withGen)).flat(), a1);
  });

  test('batchSize null: one sample at a time, through defaultConvert', async () => {
    const loader = new mp.DataLoader({ length: 3, getItem: (i: number) => ({ a: new Float32Array([i]), i }) }, { batchSize: null });
    assert.equal(loader.length, 3);
    const got: unknown[] = [];
    for await (const s of loader) got.push(s);
    assert.equal(got.length, 3);
    const s2 = got[2] as { a: mp.Tensor; i: number };
    assert.ok(s2.a instanceof mp.Tensor);
    assert.equal(s2.a.get(0), 2);
    assert.equal(s2.i, 2);
  });

  test('a custom sampler, a batch sampler, an array as dataset, an async getItem', async () => {
    assert.deepEqual(await ys(new mp.DataLoader(squares(10), { sampler: [9, 0, 5], batchSize: 2 })), [[9, 0], [5]]);
    const bs = new mp.DataLoader(squares(10), { batchSampler: [[1, 2, 3], [7]] });
    assert.equal(bs.length, 2);
    assert.deepEqual(await ys(bs), [[1, 2, 3], [7]]);
    const arr = new mp.DataLoader([10, 20, 30], { batchSize: 2 });
    const got: number[][] = [];
    for await (const b of arr) got.push((b as mp.Tensor).toArray() as number[]);
    assert.deepEqual(got, [[10, 20], [30]]);
    const viaTarget = new mp.DataLoader(target('asyncItems', 5), { batchSize: 3 });
    const nums: number[][] = [];
    for await (const b of viaTarget) nums.push((b as mp.Tensor).toArray() as number[]);
    assert.deepEqual(nums, [
      [0, 1, 2],
      [3, 4],
    ]);
    const noLen = new mp.DataLoader(squares(3), {
      sampler: (function* () {
        yield 0;
      })(),
    });
    throwsCoded(() => noLen.length, mp.NoLengthError, 'ERR_TP_NO_LENGTH');
  });

  test("iterable datasets: async and sync iterables, batched, dropLast; length from the dataset's length", async () => {
    async function* gen() {
      for (let i = 0; i < 5; i++) yield i;
    }
    const a = new mp.DataLoader({ [Symbol.asyncIterator]: gen }, { batchSize: 2 });
    const got: number[][] = [];
    for await (const b of a) got.push((b as mp.Tensor).toArray() as number[]);
    assert.deepEqual(got, [[0, 1], [2, 3], [4]]);
    throwsCoded(() => a.length, mp.NoLengthError, 'ERR_TP_NO_LENGTH');
    const s = new mp.DataLoader(new Set([1, 2, 3]), { batchSize: 2, dropLast: true });
    const got2: number[][] = [];
    for await (const b of s) got2.push((b as mp.Tensor).toArray() as number[]);
    assert.deepEqual(got2, [[1, 2]]);
    const t = new mp.DataLoader(target('stream', 7), { batchSize: 3 });
    await t.ready();
    assert.equal(t.length, 3);
    const got3: number[] = [];
    for await (const b of t) got3.push(...((b as mp.Tensor).toArray() as number[]));
    assert.deepEqual(got3, [0, 1, 2, 3, 4, 5, 6]);
  });

  test('breaking out of an iterable dataset stops its iterator (its finally runs)', async () => {
    let finished = false;
    const ds = {
      async *[Symbol.asyncIterator]() {
        try {
          for (let i = 0; ; i++) yield i;
        } finally {
          finished = true;
        }
      },
    };
    for await (const b of new mp.DataLoader(ds, { batchSize: 2 })) {
      assert.ok(b);
      break;
    }
    assert.equal(finished, true);
  });

  test('dataset targets: built by a call in this process, length known after ready(); a collate function or target', async () => {
    const loader = new mp.DataLoader(target('built', 3, 'v'), { batchSize: 2 });
    throwsCoded(() => loader.length, mp.NoLengthError, 'ERR_TP_NO_LENGTH');
    await loader.ready();
    assert.equal(loader.length, 2);
    const got: unknown[] = [];
    for await (const b of loader) got.push(b);
    assert.deepEqual(got, [['v0', 'v1'], ['v2']]);
    const sum = new mp.DataLoader(squares(5), { batchSize: 5, collate: { module: fixtures, export: 'sumY' } });
    for await (const b of sum) assert.equal(b, 10);
    const fn = new mp.DataLoader(squares(5), { batchSize: 5, collate: (batch: unknown[]) => batch.length });
    for await (const b of fn) assert.equal(b, 5);
  });

  test('getWorkerInfo() is null in the main process, during loading too', async () => {
    assert.equal(mp.getWorkerInfo(), null);
    const seen: unknown[] = [];
    const ds = {
      length: 2,
      getItem: (i: number) => {
        seen.push(mp.getWorkerInfo());
        return i;
      },
    };
    for await (const b of new mp.DataLoader(ds)) assert.ok(b);
    assert.deepEqual(seen, [null, null]);
  });

  test('default-collated batches are disposable: `using` releases their tensors', async () => {
    let kept: Sq | undefined;
    for await (const b of new mp.DataLoader(squares(4), { batchSize: 2 })) {
      using batch = b as Sq & Disposable;
      kept = batch;
    }
    throwsCoded(() => kept!.x.get(0, 0), mp.ReleasedError, 'ERR_TP_RELEASED');
    throwsCoded(() => kept!.y.get(0), mp.ReleasedError, 'ERR_TP_RELEASED');
  });

  test('stateDict mid-epoch and loadStateDict into a new loader: the rest of the same epoch, then the same next epochs', async () => {
    const opts = { batchSize: 3, shuffle: true, seed: 5 };
    const ref = new mp.DataLoader(squares(20), opts);
    const e1 = await ys(ref);
    const e2 = await ys(ref);
    const loader = new mp.DataLoader(squares(20), opts);
    let k = 0;
    for await (const b of loader) {
      mp.releaseTensors(b);
      if (++k === 3) break;
    }
    const state = JSON.parse(JSON.stringify(loader.stateDict()));
    assert.equal(state.yielded, 3);
    const resumed = new mp.DataLoader(squares(20), opts);
    resumed.loadStateDict(state);
    assert.deepEqual(resumed.stateDict(), state, 'a loaded state is what stateDict gives until the next iteration');
    assert.deepEqual(await ys(resumed), e1.slice(3));
    assert.deepEqual(await ys(resumed), e2);
    // At an epoch's end the state is the start of the next one.
    const fresh = new mp.DataLoader(squares(20), opts);
    await ys(fresh);
    const atEnd = fresh.stateDict();
    assert.equal(atEnd.yielded, 0);
    const next = new mp.DataLoader(squares(20), opts);
    next.loadStateDict(atEnd);
    assert.deepEqual(await ys(next), e2);
  });

  test('stateDict of a user sampler with its own generator, and of an iterable dataset (batches reloaded and dropped)', async () => {
    const mk = () =>
      new mp.DataLoader(squares(12), { batchSize: 2, sampler: new mp.RandomSampler(12, { generator: new mp.Generator(8) }) });
    const whole = await ys(mk());
    const l = mk();
    let k = 0;
    for await (const b of l) {
      mp.releaseTensors(b);
      if (++k === 2) break;
    }
    const r = mk();
    r.loadStateDict(l.stateDict());
    assert.deepEqual(await ys(r), whole.slice(2));
    const it = new mp.DataLoader(target('stream', 9), { batchSize: 2 });
    const got: number[][] = [];
    for await (const b of it) {
      got.push((b as mp.Tensor).toArray() as number[]);
      if (got.length === 2) break;
    }
    const it2 = new mp.DataLoader(target('stream', 9), { batchSize: 2 });
    it2.loadStateDict(it.stateDict());
    const rest: number[][] = [];
    for await (const b of it2) rest.push((b as mp.Tensor).toArray() as number[]);
    assert.deepEqual(rest, [[4, 5], [6, 7], [8]]);
  });

  test('a bad state dict is a BadStateDictError', () => {
    const l = new mp.DataLoader(squares(4));
    const bad = (s: unknown) => throwsCoded(() => l.loadStateDict(s as mp.DataLoaderState), mp.BadStateDictError, 'ERR_TP_BAD_STATE_DICT');
    bad(null);
    bad({});
    bad({ ...l.stateDict(), yielded: -1 });
    bad({ ...l.stateDict(), generator: [0, 0, 0, 0] });
    bad({ ...l.stateDict(), samplerGenerators: [[1, 2, 3, 4]] });
  });
});

describe('DataLoader options refused', () => {
  const bad = (dataset: unknown, opts: unknown) =>
    throwsCoded(
      () => new mp.DataLoader(dataset as mp.Dataset, opts as mp.DataLoaderOptions),
      mp.InvalidArgumentError,
      'ERR_TP_INVALID_ARGUMENT',
    );

  test("torch's exclusive options and bad values", () => {
    bad(squares(3), { shuffle: true, sampler: [0] });
    bad(squares(3), { batchSampler: [[0]], batchSize: 2 });
    bad(squares(3), { batchSampler: [[0]], dropLast: true });
    bad(squares(3), { batchSize: null, dropLast: true });
    bad(squares(3), { batchSize: 0 });
    bad(squares(3), { numWorkers: -1 });
    bad(squares(3), { prefetchFactor: 2 });
    bad(squares(3), { persistentWorkers: true });
    bad(squares(3), { timeout: -5 });
    bad(squares(3), { seed: 1.5 });
    bad(squares(3), { seed: 1, generator: new mp.Generator(1) });
    bad(squares(3), { bogus: 1 });
    bad(squares(3), { collate: 'sum' });
    bad(squares(3), { startMethod: 'fork' });
    bad([1, 2], { shuffle: true, batchSize: 1, sampler: new mp.SequentialSampler(2) });
    bad(new Set([1]), { shuffle: true });
  });

  test('an iterable dataset target with shuffle is refused when it is built', async () => {
    const l = new mp.DataLoader(target('stream', 4), { shuffle: true });
    await assert.rejects(l.ready(), isCoded(mp.InvalidArgumentError, 'ERR_TP_INVALID_ARGUMENT'));
  });

  test("not a dataset: InvalidDatasetError, from the constructor or from the target's build", async () => {
    throwsCoded(() => new mp.DataLoader(42 as unknown as mp.Dataset), mp.InvalidDatasetError, 'ERR_TP_INVALID_DATASET');
    throwsCoded(() => new mp.DataLoader({ length: -1, getItem: () => 0 }), mp.InvalidDatasetError, 'ERR_TP_INVALID_DATASET');
    await assert.rejects(new mp.DataLoader(target('notADataset')).ready(), isCoded(mp.InvalidDatasetError, 'ERR_TP_INVALID_DATASET'));
    await assert.rejects(
      new mp.DataLoader(target('notAFunction')).ready(),
      isCoded(mp.TargetNotFunctionError, 'ERR_TP_TARGET_NOT_FUNCTION'),
    );
    throwsCoded(() => new mp.DataLoader({ module: 5 } as unknown as mp.DatasetTarget), mp.InvalidArgumentError, 'ERR_TP_INVALID_ARGUMENT');
  });

  test('with workers, a dataset object or a function is refused, saying to pass a target', () => {
    const e = throwsCoded(
      () => new mp.DataLoader(squares(3), { numWorkers: 2 }),
      mp.DatasetNeedsTargetError,
      'ERR_TP_DATASET_NEEDS_TARGET',
    );
    assert.match(e.message, /dataset target/);
    throwsCoded(
      () => new mp.DataLoader(target('squares', 3), { numWorkers: 1, collate: (b: unknown[]) => b }),
      mp.DatasetNeedsTargetError,
      'ERR_TP_DATASET_NEEDS_TARGET',
    );
    throwsCoded(
      () => new mp.DataLoader(target('squares', 3), { numWorkers: 1, workerInit: () => {} }),
      mp.DatasetNeedsTargetError,
      'ERR_TP_DATASET_NEEDS_TARGET',
    );
  });
});
