// NOTE [Releasing samples] (collate-stream.ts) and NOTE [Releasing private memory]
// (storage.ts): with `releaseSamples`, default collate releases each sample's tensors once it
// has copied them into the batch, in this process and in workers; the batches, and every
// error, are what they are without it.
import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import * as mp from '../../src/index.js';
import { isCoded, throwsCoded } from '../helpers/errors.js';
import { checkLeaks } from '../helpers/leaks.js';

checkLeaks();

const fixtures = new URL('./fixtures/datasets.js', import.meta.url);

/** A dataset object that keeps every tensor it returns; sample `odd` (if any) has another shape, and `later` ones answer with a promise. */
function recording(n: number, odd = -1, later = Infinity) {
  const returned: mp.Tensor[] = [];
  const dataset: mp.MapDataset<{ x: mp.Tensor; y: number }> = {
    length: n,
    getItem(i) {
      const x = mp.full(i === odd ? [5] : [2, 3], i);
      returned.push(x);
      const s = { x, y: i };
      return (i >= later ? Promise.resolve(s) : s) as { x: mp.Tensor; y: number };
    },
  };
  return { dataset, returned };
}

async function batches(loader: mp.DataLoader<unknown>): Promise<unknown[]> {
  const out: unknown[] = [];
  for await (const b of loader) {
    const { x, y } = b as { x: mp.Tensor; y: mp.Tensor };
    out.push({ x: x.toArray(), y: y.toArray() });
    mp.releaseTensors(b);
  }
  return out;
}

describe('DataLoader releaseSamples', () => {
  test('in this process: the batches are the same, and every sample is released once collated (without the option none is)', async () => {
    for (const later of [Infinity, 2]) {
      // streamed; and samples 2.. answering with promises (the fallback)
      const plain = recording(10, -1, later);
      const owned = recording(10, -1, later);
      const want = await batches(new mp.DataLoader(plain.dataset, { batchSize: 4 }));
      assert.deepEqual(await batches(new mp.DataLoader(owned.dataset, { batchSize: 4, releaseSamples: true })), want);
      assert.ok(
        owned.returned.every((t) => t.storage.isReleased()),
        'every sample released',
      );
      assert.ok(
        plain.returned.every((t) => !t.storage.isReleased()),
        'none released without the option',
      );
    }
  });

  test('a sample of another structure: the same CollateError as without the option, word for word, and the samples released', async () => {
    const messageOf = async (opts: mp.DataLoaderOptions, ds: mp.MapDataset<unknown>) => {
      const e = await batches(new mp.DataLoader(ds, opts)).then(
        () => null,
        (err: unknown) => err,
      );
      assert.ok(isCoded(mp.CollateError, 'ERR_TP_COLLATE')(e));
      return (e as Error).message;
    };
    const plain = recording(8, 6);
    const owned = recording(8, 6);
    assert.equal(await messageOf({ batchSize: 8, releaseSamples: true }, owned.dataset), await messageOf({ batchSize: 8 }, plain.dataset));
    assert.ok(owned.returned.every((t) => t.storage.isReleased()));
  });

  test('a dataset that returns a tensor it keeps: ERR_TP_RELEASED naming releaseSamples, not a copy of freed memory', async () => {
    const kept = mp.full([3], 7);
    const loader = new mp.DataLoader({ length: 4, getItem: () => kept }, { batchSize: 2, releaseSamples: true });
    await assert.rejects(batches(loader), (e: any) => isCoded(mp.ReleasedError, 'ERR_TP_RELEASED')(e) && /releaseSamples/.test(e.message));
  });

  test('a released tensor after a fresh one in a sample: ERR_TP_RELEASED before any tensor of that sample is released', async () => {
    const dead = mp.full([3], 1);
    dead.release();
    const fresh: mp.Tensor[] = [];
    const getItem = (i: number) => {
      const t = mp.full([3], i);
      fresh.push(t);
      return i === 1 ? [t, dead] : [t, mp.full([3], i)]; // the walk meets the fresh tensor first
    };
    const loader = new mp.DataLoader({ length: 2, getItem }, { batchSize: 2, releaseSamples: true });
    await assert.rejects(
      batches(loader),
      (e: any) => isCoded(mp.ReleasedError, 'ERR_TP_RELEASED')(e) && /Sample 1 .*releaseSamples/.test(e.message),
    );
    assert.ok(fresh[0]!.storage.isReleased(), 'sample 0 was collated, then released');
    assert.ok(!fresh[1]!.storage.isReleased(), 'nothing of sample 1 released');
  });

  test('with workers (processes and threads): samples released in the worker as the batch is made', async () => {
    for (const startMethod of ['spawn', 'thread'] as const) {
      for (const releaseSamples of [false, true]) {
        const loader = new mp.DataLoader(
          { module: fixtures, export: 'releaseWatch', args: [12] },
          { batchSize: 4, numWorkers: 2, startMethod, releaseSamples },
        );
        for await (const b of loader) {
          const { x, y } = b as { x: mp.Tensor; y: mp.Tensor };
          const ys = y.toArray() as number[];
          const xs = (x.toArray() as number[][]).map((r) => r[0]);
          assert.equal(new Set(xs).size, 4);
          // y of sample k: the samples its replica returned before, released by then.
          if (releaseSamples) ys.forEach((v, k) => assert.ok(v >= k, `${startMethod}: sample ${k} saw ${v} released`));
          else assert.deepEqual(ys, [0, 0, 0, 0]);
          mp.releaseTensors(b);
        }
      }
    }
  });

  test('bad options: not a boolean, without batching, with a collate', () => {
    const ds = { length: 1, getItem: () => 1 };
    throwsCoded(
      () => new mp.DataLoader(ds, { releaseSamples: 1 as unknown as boolean }),
      mp.InvalidArgumentError,
      'ERR_TP_INVALID_ARGUMENT',
    );
    throwsCoded(() => new mp.DataLoader(ds, { batchSize: null, releaseSamples: true }), mp.InvalidArgumentError, 'ERR_TP_INVALID_ARGUMENT');
    throwsCoded(
      () => new mp.DataLoader(ds, { collate: (b: unknown[]) => b, releaseSamples: true }),
      mp.InvalidArgumentError,
      'ERR_TP_INVALID_ARGUMENT',
    );
  });
});

describe('release() of private memory', () => {
  test("frees memory the tensor allocated (its views empty, as a shared tensor's); the caller's own memory is left be", () => {
    const t = mp.empty([1024]);
    const view = t.data;
    t.release();
    assert.equal(view.length, 0, 'the buffer was detached: its memory is free');
    const mine = new Float32Array([1, 2, 3]);
    const w = mp.tensor(mine);
    w.release();
    assert.deepEqual([...mine], [1, 2, 3], 'a wrapped array keeps its memory');
    const c = mp.zeros([8]).clone();
    const cv = c.data;
    c.release();
    assert.equal(cv.length, 0);
  });
});
