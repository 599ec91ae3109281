// Ports of PyTorch's test/test_multiprocessing.py CPU cases (sharing fill and receive,
// preserve sharing, inherit tensor, the /dev/shm checks), under both strategies and both
// start methods, plus many producers and consumers, a killed consumer, and 100,000 received
// tensors under a low open-file limit.
import { test, describe, afterEach } from 'node:test';
import assert from 'node:assert/strict';
import * as mp from '../../src/index.js';
import { checkLeaks, namesHeldBy, shmSegments } from '../helpers/leaks.js';
import { waitFor } from '../helpers/wait.js';

checkLeaks();

const targets = new URL('./fixtures/targets.js', import.meta.url);
const target = (name: string) => ({ module: targets, export: name });
const STRATEGIES = ['file_descriptor', 'file_system'] as const;
const METHODS = ['spawn', 'thread'] as const;

afterEach(() => mp.setSharingStrategy('file_descriptor'));

for (const strategy of STRATEGIES) {
  for (const startMethod of METHODS) {
    describe(`${strategy}, ${startMethod}`, () => {
      test('sharing: a child fills what it received and the parent sees it (torch test_fill)', async () => {
        mp.setSharingStrategy(strategy);
        const x = mp.zeros([5, 5]);
        const q = new mp.Queue<mp.Tensor[]>();
        const e = new mp.Event();
        const data = [x, x.select(1, 1)];
        await q.put(data);
        assert.equal(x.isShared(), true, 'put moves a tensor into shared memory');
        await mp.startProcesses(target('simpleFill'), { args: [q, e, strategy], startMethod });
        assert.equal(await e.wait(10_000), true);
        assert.deepEqual(
          data[0]!.toArray(),
          Array.from({ length: 5 }, () => [4, 4, 4, 4, 4]),
        );
        assert.deepEqual(data[1]!.toArray(), [4, 4, 4, 4, 4]);
        q.close();
        e.close();
        x.release();
      });

      test('sharing: two messages of one tensor arrive over one storage (torch test_receive)', async () => {
        mp.setSharingStrategy(strategy);
        const q = new mp.Queue<mp.Tensor>();
        const e = new mp.Event();
        const ctx = await mp.startProcesses(target('sendTensor'), { args: [q, e, strategy], startMethod, join: false });
        const t1 = await q.get();
        const t2 = await q.get();
        assert.deepEqual(
          t1.toArray(),
          Array.from({ length: 5 }, () => [1, 1, 1, 1, 1]),
        );
        assert.equal(t1.storage, t2.storage);
        t1.release();
        e.set();
        assert.equal(await ctx.join(), true);
        q.close();
        e.close();
      });

      test('preserve sharing: a storage and views of it come back over one storage (torch test_preserve_sharing)', async () => {
        mp.setSharingStrategy(strategy);
        const x = mp.tensor([
          [1, 2, 3],
          [4, 5, 6],
          [7, 8, 9],
        ]);
        const data = [x.storage, x, x.select(0, 2), x.select(1, 1)] as const;
        const q = new mp.Queue();
        const back = new mp.Queue<typeof data>();
        await q.put(data);
        await mp.startProcesses(target('forward'), { args: [q, back, strategy], startMethod });
        const got = await back.get();
        assert.ok(got[0] instanceof mp.Storage);
        for (const t of got.slice(1) as mp.Tensor[]) assert.equal(t.storage, got[0]);
        assert.deepEqual((got[2] as mp.Tensor).toArray(), [7, 8, 9]);
        assert.deepEqual((got[3] as mp.Tensor).toArray(), [2, 5, 8]);
        // The storage comes back to its creator as the very same storage, under both
        // strategies (a memfd's descriptor is kept by the child: NOTE [Kept descriptors]).
        assert.equal(got[0], x.storage);
        (got[1] as mp.Tensor)[Symbol.dispose]();
        x[Symbol.dispose]();
        q.close();
        back.close();
      });

      test('inherit tensor: a tensor in spawn arguments is shared with the child (torch test_inherit_tensor)', async () => {
        mp.setSharingStrategy(strategy);
        const t = mp.zeros([4, 4]);
        await mp.startProcesses(target('fillArg'), { args: [t, 7], startMethod, nprocs: 2 });
        assert.equal(t.isShared(), true);
        assert.deepEqual(
          t.toArray(),
          Array.from({ length: 4 }, () => [7, 7, 7, 7]),
        );
        t.release();
      });

      test('a consumer passes a received tensor on to another queue', async () => {
        mp.setSharingStrategy(strategy);
        const t = mp.full([3], 5, { shared: true });
        const q = new mp.Queue<mp.Tensor>();
        const back = new mp.Queue<mp.Tensor>();
        await q.put(t);
        await mp.startProcesses(target('forward'), { args: [q, back, strategy], startMethod });
        const r = await back.get();
        assert.deepEqual(r.toArray(), [5, 5, 5]);
        r.release();
        if (!t.storage.isReleased()) t.release();
        q.close();
        back.close();
      });

      test('4 producers and 2 consumers deliver every item exactly once', async () => {
        mp.setSharingStrategy(strategy);
        const q = new mp.Queue({ maxsize: 8 });
        const out = new mp.Queue<string[]>();
        const count = 200;
        const producers = await mp.startProcesses(target('produce'), { args: [q, count, strategy], nprocs: 4, startMethod, join: false });
        const consumers = await mp.startProcesses(target('consume'), { args: [q, out, strategy], nprocs: 2, startMethod, join: false });
        assert.equal(await producers.join(), true);
        await q.put(null);
        await q.put(null);
        const ids = [...(await out.get()), ...(await out.get())];
        assert.equal(await consumers.join(), true);
        assert.equal(ids.length, 4 * count);
        assert.equal(new Set(ids).size, 4 * count);
        q.close();
        out.close();
      });

      // Regression: a producer that cleared NOTICED before reading the notice could read one
      // sent in between and leave NOTICED set with nothing in the socket; every producer then
      // waited for ever on a queue with free slots (NOTE [Queue slots]). maxsize 1 makes
      // every put wait for a notice, so the race gets thousands of chances.
      test('a queue of maxsize 1 shared by 4 producers and 2 consumers never stalls', async () => {
        mp.setSharingStrategy(strategy);
        const q = new mp.Queue<number | null>({ maxsize: 1 });
        const out = new mp.Queue<{ n: number; sum: number }>();
        const count = 2500;
        const producers = await mp.startProcesses(target('produceNumbers'), { args: [q, count], nprocs: 4, startMethod, join: false });
        const consumers = await mp.startProcesses(target('consumeNumbers'), { args: [q, out], nprocs: 2, startMethod, join: false });
        assert.equal(await producers.join(), true);
        await q.put(null);
        await q.put(null);
        const [a, b] = [await out.get(), await out.get()];
        assert.equal(await consumers.join(), true);
        const total = 4 * count;
        assert.equal(a.n + b.n, total);
        assert.equal(a.sum + b.sum, (total * (total - 1)) / 2);
        q.close();
        out.close();
      });
    });
  }

  describe(`${strategy}, process children only`, () => {
    test('a consumer killed while holding tensors does not stop the producer', async () => {
      mp.setSharingStrategy(strategy);
      const q = new mp.Queue<mp.Tensor>({ maxsize: 4 });
      const ready = new mp.Event();
      const ctx = await mp.spawn(target('holdAndWait'), { args: [q, ready, 3, strategy], join: false });
      for (let k = 0; k < 3; k++) {
        const t = mp.full([256], k, { shared: true });
        await q.put(t);
        t.release();
      }
      assert.equal(await ready.wait(20_000), true);
      const consumer = ctx.pids()[0]!;
      process.kill(consumer, 'SIGKILL');
      await assert.rejects(ctx.join(), { code: 'ERR_TP_PROCESS_EXITED', signalName: 'SIGKILL' });
      // Under file_system the manager takes back what the consumer held (a few ms after its
      // death); the suite's leak check must not race it.
      if (strategy === 'file_system') await waitFor(() => namesHeldBy(consumer).length === 0);
      // The producer goes on: new tensors, the queue, and a consumer here.
      for (let k = 0; k < 10; k++) {
        const t = mp.full([256], k, { shared: true });
        await q.put(t);
        t.release();
        const r = await q.get();
        assert.equal(r.get(255), k);
        r.release();
      }
      assert.equal(q.qsize(), 0);
      q.close();
      ready.close();
    });

    test('100,000 received tensors held under a 256-descriptor limit', async () => {
      mp.setSharingStrategy(strategy);
      const n = 100_000;
      const distinct = 1000;
      const q = new mp.Queue<mp.Tensor>({ maxsize: 256 });
      const out = new mp.Queue<{ held: number; storages: number; fds: number; kept: number; bad: number }>();
      const ctx = await mp.spawn(target('holdMany'), { args: [q, out, n, strategy], join: false });
      // Above PACK_BYTES: a segment each, whose descriptors the consumer must bound (small
      // ones share slabs: test/sharing/packing.test.ts).
      const tensors = Array.from({ length: distinct }, (_, k) => mp.full([256], k, { shared: true }));
      for (let k = 0; k < n; k++) await q.put(tensors[k % distinct]!);
      const r = await out.get();
      assert.equal(await ctx.join(), true);
      assert.deepEqual(r, { held: n, storages: distinct, fds: r.fds, kept: r.kept, bad: 0 });
      // It keeps the descriptors of at most half its limit of received segments (NOTE [Kept
      // descriptors]), and never more than it has room for.
      if (strategy === 'file_descriptor') assert.ok(r.kept > 16 && r.kept <= 128, `it keeps ${r.kept}`);
      else assert.equal(r.kept, 0);
      assert.ok(r.fds < 200, `the consumer holds ${r.fds} descriptors`);
      for (const t of tensors) t.release();
      q.close();
      out.close();
    });
  });
}

describe('/dev/shm', () => {
  test('file_system: a queued storage is a name in /dev/shm until it is received and dropped (torch test_fs)', async () => {
    mp.setSharingStrategy('file_system');
    mp.emptyCache(); // a recycled segment would already be there
    const before = new Set(shmSegments());
    const q = new mp.Queue<mp.Storage>();
    const t = mp.zeros([4], { dtype: 'float64' });
    await q.put(t.storage);
    t.release();
    assert.ok(
      shmSegments().some((n) => !before.has(n)),
      'a segment name exists while the message is queued',
    );
    const s = await q.get();
    assert.equal(s.nbytes, 32);
    s.release();
    mp.emptyCache();
    assert.deepEqual(
      shmSegments().filter((n) => !before.has(n)),
      [],
    );
    q.close();
  });

  test('file_descriptor: nothing ever appears in /dev/shm', async () => {
    mp.setSharingStrategy('file_descriptor');
    const before = new Set(shmSegments());
    const q = new mp.Queue<mp.Tensor>();
    const t = mp.zeros([1024]);
    await q.put(t);
    assert.deepEqual(
      shmSegments().filter((n) => !before.has(n)),
      [],
    );
    (await q.get()).release();
    q.close();
  });
});
