// The DataLoader with worker processes: order, shuffle and seeds reproducible, iterable
// datasets sharded by getWorkerInfo(), workerInit, custom collate, batches in shared memory,
// persistent workers over several epochs, early break, inOrder: false, the bound on batches
// in flight, resuming with stateDict, and worker threads.
import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import * as mp from '../../src/index.js';
import { isCoded, throwsCoded } from '../helpers/errors.js';
import { checkLeaks } from '../helpers/leaks.js';
import { running } from '../helpers/procs.js';

checkLeaks();

const fixtures = new URL('./fixtures/datasets.js', import.meta.url);
const target = (name: string, ...args: unknown[]) => ({ module: fixtures, export: name, args });

/** Every batch's values (a tensor, or the y of a {x, y} batch), releasing the batches. */
async function collect(loader: AsyncIterable<unknown>, stopAfter = Infinity): Promise<unknown[][]> {
  const out: unknown[][] = [];
  for await (const b of loader) {
    const t = b instanceof mp.Tensor ? b : (b as { y: mp.Tensor }).y;
    out.push(t.toArray() as unknown[]);
    mp.releaseTensors(b);
    if (out.length >= stopAfter) break;
  }
  return out;
}

describe('DataLoader with workers', () => {
  test('batches in sampler order, in shared memory, the last one short; length as without workers', async () => {
    const loader = new mp.DataLoader(target('squares', 10), { batchSize: 3, numWorkers: 2 });
    await loader.ready();
    assert.equal(loader.length, 4);
    const got: number[][] = [];
    for await (const b of loader) {
      const { x, y } = b as { x: mp.Tensor; y: mp.Tensor };
      assert.ok(x.isShared() && y.isShared());
      const ys = y.toArray() as number[];
      assert.deepEqual(
        x.toArray(),
        ys.map((i) => [i, i, i]),
      );
      got.push(ys);
      mp.releaseTensors(b);
    }
    assert.deepEqual(got, [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9]]);
    assert.deepEqual(loader.workerPids, [], 'the workers of a non-persistent loader are gone after the epoch');
  });

  test('shuffle with a seed: every index once, the same epochs as without workers, whatever the worker count', async () => {
    const opts = { batchSize: 4, shuffle: true, seed: 21 };
    const ref = new mp.DataLoader(target('squares', 30), opts);
    const e1 = await collect(ref);
    const e2 = await collect(ref);
    assert.deepEqual(
      e1.flat().sort((a, b) => (a as number) - (b as number)),
      Array.from({ length: 30 }, (_, i) => i),
    );
    for (const numWorkers of [1, 3]) {
      const loader = new mp.DataLoader(target('squares', 30), { ...opts, numWorkers });
      assert.deepEqual(await collect(loader), e1);
      assert.deepEqual(await collect(loader), e2);
    }
  });

  test('worker info and seeds: base seed + id, the same for the same seed; a new base seed each epoch unless persistent', async () => {
    const seedsOf = async (loader: mp.DataLoader) => {
      const rows: number[][] = [];
      for await (const b of loader) {
        const cols = (b as mp.Tensor[]).map((t) => t.toArray() as number[]);
        for (let k = 0; k < cols[0]!.length; k++) rows.push(cols.map((c) => c[k]!));
        mp.releaseTensors(b);
      }
      const byWorker = new Map(rows.map((r) => [r[0]!, r.slice(1)]));
      return [...byWorker].sort((a, b) => a[0] - b[0]);
    };
    const mk = (persistentWorkers: boolean) =>
      new mp.DataLoader(target('seeds', 8), { batchSize: 2, numWorkers: 2, seed: 99, persistentWorkers });
    const a = mk(false);
    const a1 = await seedsOf(a);
    assert.deepEqual(
      a1.map(([id]) => id),
      [0, 1],
    );
    const [[, [s0, d0]], [, [s1, d1]]] = a1 as [number, number[]][];
    assert.equal(s1, s0! + 1, 'seed = base seed + worker id');
    assert.notEqual(d0, d1, "each worker's generator has its own stream");
    const a2 = await seedsOf(a);
    assert.notEqual(a2[0]![1][0], s0, 'a new iterator draws a new base seed');
    const b = mk(false);
    assert.deepEqual(await seedsOf(b), a1, 'the same seed gives the same worker seeds and generators');
    assert.deepEqual(await seedsOf(b), a2);
    const p = mk(true);
    const p1 = await seedsOf(p);
    assert.deepEqual(p1, a1);
    assert.deepEqual(
      (await seedsOf(p)).map(([id, [s]]) => [id, s]),
      p1.map(([id, [s]]) => [id, s]),
      'persistent workers keep theirs',
    );
    await p.close();
  });

  test("each worker's Math.random is seeded with its seed (NOTE [Seeding Math.random]): the same for the same loader seed, its own per worker, processes and threads", async () => {
    for (const startMethod of ['spawn', 'thread'] as const) {
      const draws = async (seed: number) => {
        const loader = new mp.DataLoader(target('mathRandoms', 4), { batchSize: 2, numWorkers: 2, seed, startMethod });
        const byWorker = new Map<number, number[]>();
        for await (const b of loader) {
          const [ids, firsts, expected] = (b as mp.Tensor[]).map((t) => t.toArray() as number[]);
          ids!.forEach((id, k) => byWorker.set(id, [firsts![k]!, expected![k]!]));
          mp.releaseTensors(b);
        }
        return [...byWorker].sort((x, y) => x[0] - y[0]);
      };
      const a = await draws(7);
      assert.deepEqual(
        a.map(([id]) => id),
        [0, 1],
        startMethod,
      );
      for (const [id, [first, expected]] of a)
        assert.equal(first, expected, `${startMethod} worker ${id}: Math.random is the stream of a Generator of its seed`);
      assert.notEqual(a[0]![1][0], a[1]![1][0], `${startMethod}: each worker has its own stream`);
      assert.deepEqual(await draws(7), a, `${startMethod}: the same loader seed, the same draws`);
      assert.notDeepEqual(await draws(8), a, `${startMethod}: another seed, other draws`);
    }
    assert.match(Function.prototype.toString.call(Math.random), /\[native code\]/, "the main thread's Math.random is V8's");
  });

  test('an iterable dataset sharded by getWorkerInfo(): every item once, none twice', async () => {
    for (const numWorkers of [1, 2, 3]) {
      const loader = new mp.DataLoader(target('stream', 23), { batchSize: 4, numWorkers });
      const items = (await collect(loader)).flat() as number[];
      assert.deepEqual(
        [...items].sort((x, y) => x - y),
        Array.from({ length: 23 }, (_, i) => i),
        `numWorkers ${numWorkers}`,
      );
    }
    const p = new mp.DataLoader(target('stream', 10), { batchSize: 3, numWorkers: 2, persistentWorkers: true });
    for (let e = 0; e < 3; e++) assert.equal((await collect(p)).flat().length, 10, `persistent epoch ${e}: the replicas start over`);
    await p.close();
  });

  test('workerInit runs in each worker before loading; collate and batchSize null work in workers', async () => {
    const init = new mp.DataLoader(target('initMarks', 6), {
      batchSize: 3,
      numWorkers: 2,
      workerInit: { module: fixtures, export: 'markInit' },
    });
    const got: unknown[] = [];
    for await (const b of init) got.push(b);
    assert.deepEqual(got, [
      ['init0', 'init0', 'init0'],
      ['init1', 'init1', 'init1'],
    ]);
    const sum = new mp.DataLoader(target('squares', 6), { batchSize: 3, numWorkers: 2, collate: { module: fixtures, export: 'sumY' } });
    const sums: unknown[] = [];
    for await (const b of sum) sums.push(b);
    assert.deepEqual(sums, [3, 12]);
    const single = new mp.DataLoader(target('squares', 3), { batchSize: null, numWorkers: 2 });
    const ys: unknown[] = [];
    for await (const s of single) ys.push((s as { y: number }).y);
    assert.deepEqual(ys, [0, 1, 2]);
  });

  test('persistent workers: the same processes every epoch, parked in between, stopped by close()', async () => {
    const loader = new mp.DataLoader(target('squares', 12), {
      batchSize: 2,
      numWorkers: 2,
      persistentWorkers: true,
      shuffle: true,
      seed: 3,
    });
    // Persistent workers draw their base seed once, so their epochs match another persistent loader's.
    const ref = new mp.DataLoader(target('squares', 12), { batchSize: 2, numWorkers: 1, persistentWorkers: true, shuffle: true, seed: 3 });
    let pids: number[] | null = null;
    for (let e = 0; e < 3; e++) {
      assert.deepEqual(await collect(loader), await collect(ref));
      const now = loader.workerPids;
      assert.equal(now.length, 2);
      pids ??= now;
      assert.deepEqual(now, pids);
    }
    await loader.close();
    await ref.close();
    assert.deepEqual(loader.workerPids, []);
    assert.ok(
      pids!.every((p) => !running(p)),
      'close() waits for the workers to exit',
    );
  });

  test("await using: the loader's persistent workers are stopped at the end of the block", async () => {
    let pids: number[];
    {
      await using loader = new mp.DataLoader(target('squares', 8), { batchSize: 2, numWorkers: 2, persistentWorkers: true });
      assert.equal((await collect(loader)).length, 4);
      pids = loader.workerPids;
      assert.equal(pids.length, 2);
      assert.ok(pids.every(running), 'parked, not stopped, after the epoch');
    }
    assert.ok(
      pids.every((p) => !running(p)),
      'stopped and awaited by the disposal',
    );
  });

  test('early break: non-persistent workers are stopped before the loop goes on; persistent ones drop what they had loaded', async () => {
    const loader = new mp.DataLoader(target('squares', 40), { batchSize: 2, numWorkers: 2 });
    let pids: number[] = [];
    for await (const b of loader) {
      pids = loader.workerPids;
      mp.releaseTensors(b);
      break;
    }
    assert.equal(pids.length, 2);
    assert.ok(pids.every((p) => !running(p)));
    const p = new mp.DataLoader(target('squares', 40), { batchSize: 2, numWorkers: 2, persistentWorkers: true });
    assert.deepEqual(await collect(p, 3), [
      [0, 1],
      [2, 3],
      [4, 5],
    ]);
    const whole = await collect(p);
    assert.deepEqual(
      whole,
      Array.from({ length: 20 }, (_, k) => [2 * k, 2 * k + 1]),
      "the next epoch sees none of the last one's batches",
    );
    await p.close();
  });

  test('inOrder: false hands out batches as they are ready, and sends new ones to the worker holding fewest', async () => {
    // Worker 0 is stuck on sample 0 (and holds sample 2, sent to it before); every other
    // batch goes to worker 1 and comes first.
    const gate = new mp.Event();
    const loader = new mp.DataLoader(target('gated', 8, [0], gate), { batchSize: 1, numWorkers: 2, inOrder: false });
    const got: number[] = [];
    for await (const b of loader) {
      got.push((b as mp.Tensor).get(0) as number);
      if (got.length === 6) gate.set();
      mp.releaseTensors(b);
    }
    assert.deepEqual(got.slice(0, 6).sort(), [1, 3, 4, 5, 6, 7]);
    assert.deepEqual(got.slice(6), [0, 2]);
    gate.close();
  });

  test('at most prefetchFactor x numWorkers batches are loaded ahead of what the consumer asked for', async () => {
    for (const [numWorkers, prefetchFactor] of [
      [2, 2],
      [3, 1],
    ] as const) {
      const asked = mp.zeros([1], { dtype: 'int32', shared: true });
      const limit = numWorkers * prefetchFactor;
      const loader = new mp.DataLoader(target('bounded', 30, asked, limit), { batchSize: 1, numWorkers, prefetchFactor });
      const it = loader[Symbol.asyncIterator]();
      for (let k = 0; ; k++) {
        asked.set([0], k + 1);
        const r = await it.next();
        if (r.done) break;
        assert.equal((r.value as mp.Tensor).get(0), k);
        mp.releaseTensors(r.value);
      }
      asked.release();
    }
  });

  test('stateDict with workers: a resumed loader hands out exactly the batches not handed out yet, inOrder false included', async () => {
    for (const inOrder of [true, false]) {
      const opts = { batchSize: 2, shuffle: true, seed: 4, numWorkers: 2, inOrder };
      const first = new mp.DataLoader(target('squares', 24), opts);
      const before = await collect(first, 5);
      const state = JSON.parse(JSON.stringify(first.stateDict()));
      const resumed = new mp.DataLoader(target('squares', 24), opts);
      resumed.loadStateDict(state);
      const after = await collect(resumed);
      const all = [...before, ...after].map((b) => JSON.stringify(b)).sort();
      const ref = (await collect(new mp.DataLoader(target('squares', 24), { ...opts, numWorkers: 0, inOrder: true })))
        .map((b) => JSON.stringify(b))
        .sort();
      assert.deepEqual(all, ref, `inOrder ${inOrder}`);
    }
  });

  test('worker threads (startMethod thread) load the same batches', async () => {
    const loader = new mp.DataLoader(target('squares', 7), { batchSize: 3, numWorkers: 2, startMethod: 'thread', persistentWorkers: true });
    assert.deepEqual(await collect(loader), [[0, 1, 2], [3, 4, 5], [6]]);
    assert.deepEqual(await collect(loader), [[0, 1, 2], [3, 4, 5], [6]]);
    await loader.close();
  });

  test('a second iteration while persistent workers serve one is refused; close() fails a running one', async () => {
    const loader = new mp.DataLoader(target('squares', 20), { batchSize: 2, numWorkers: 1, persistentWorkers: true });
    const it = loader[Symbol.asyncIterator]();
    mp.releaseTensors((await it.next()).value);
    await assert.rejects(loader[Symbol.asyncIterator]().next(), isCoded(mp.InvalidArgumentError, 'ERR_TP_INVALID_ARGUMENT'));
    await loader.close();
    await assert.rejects(it.next(), isCoded(mp.DataLoaderClosedError, 'ERR_TP_DATALOADER_CLOSED'));
    assert.deepEqual(
      await collect(loader),
      Array.from({ length: 10 }, (_, k) => [2 * k, 2 * k + 1]),
      'a closed loader starts new workers',
    );
    await loader.close();
    throwsCoded(
      () => new mp.DataLoader(target('squares', 2), { numWorkers: 1, prefetchFactor: 0 }),
      mp.InvalidArgumentError,
      'ERR_TP_INVALID_ARGUMENT',
    );
  });
});
