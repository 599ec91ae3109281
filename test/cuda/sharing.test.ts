// CUDA tensors in one process and across processes, against the stand-in driver
// (test/cuda/fixtures/fakecuda.c) or, on a device (TP_CUDA_REAL=1), the real one: the
// seed's three rules (docs/cuda.md), the owner's cache, forwarding, 1,000 round trips.
import { test, describe, after } from 'node:test';
import assert from 'node:assert/strict';
import { REAL, useDriver, cudaSkip } from './driver.js';
import * as mp from '../../src/index.js';
import { addon } from '../../src/native/index.js';
import { importChunk } from '../../src/cuda/index.js';
import { checkLeaks, openFds } from '../helpers/leaks.js';

useDriver();
const skip = cudaSkip(mp.cuda.isAvailable(), mp.cuda.unavailableReason());
if (skip === false) {
  // The real driver opens descriptors of its own (/dev/nvidia*) at its first context and
  // allocation, for the process's life: they are opened before the leak check looks.
  mp.empty([1], { device: 'cuda' }).release();
  mp.cuda.emptyCache();
}
checkLeaks();
after(() => {
  mp.cuda.emptyCache();
  mp.emptyCache();
});

const targets = new URL('./fixtures/targets.js', import.meta.url);
const target = (name: string) => ({ module: targets, export: name });
const first = async (t: mp.Tensor): Promise<number> => Number((await t.narrow(0, 0, 1).cpu()).get(0));

describe('CUDA tensors', { skip }, () => {
  test('in one process: fills of every width, views, copies, to/cpu/cuda, host access refused', async () => {
    for (const [dtype, v] of [
      ['float32', 2.5],
      ['float64', -1.25],
      ['int64', 2n ** 40n + 3n],
      ['int16', -7],
      ['uint8', 200],
      ['bool', true],
    ] as const) {
      const t = mp.full([3, 4], v as never, { dtype, device: 'cuda' });
      assert.equal(t.device, 'cuda:0');
      const c = await t.cpu();
      assert.deepEqual(
        c.toArray(),
        Array.from({ length: 3 }, () => Array(4).fill(v)),
        dtype,
      );
      t.release();
    }
    const z = mp.zeros([6], { dtype: 'int32', device: 'cuda:0' });
    z.narrow(0, 2, 3).fill(7);
    assert.deepEqual((await z.cpu()).toArray(), [0, 0, 7, 7, 7, 0]);
    const h = await mp.tensor([1, 2, 3, 4, 5, 6], { dtype: 'int32' }).cuda();
    z.copy(h);
    const k = z.clone();
    assert.deepEqual((await k.to('cpu')).toArray(), [1, 2, 3, 4, 5, 6]);
    assert.equal(await k.to('cuda'), k, 'to() its own device is the tensor itself');
    assert.equal(mp.zeros([2]).device, 'cpu');
    for (const f of [() => z.data, () => z.get(0), () => z.set([0], 1), () => z.toArray(), () => z.storage.buffer]) {
      assert.throws(f, { name: 'CudaHostAccessError', code: 'ERR_TP_CUDA_HOST_ACCESS' });
    }
    assert.throws(() => z.copy(mp.zeros([6], { dtype: 'int32' })), { name: 'DeviceMismatchError', code: 'ERR_TP_DEVICE_MISMATCH' });
    assert.throws(() => mp.zeros([6], { dtype: 'int32' }).copy(z), { code: 'ERR_TP_DEVICE_MISMATCH' });
    assert.throws(() => mp.empty([1], { device: 'cuda:7' }), { name: 'InvalidArgumentError', code: 'ERR_TP_INVALID_ARGUMENT' });
    assert.throws(() => mp.empty([1], { device: 'gpu' as never }), { code: 'ERR_TP_INVALID_ARGUMENT' });
    assert.throws(() => z.pinMemory(), { code: 'ERR_TP_INVALID_ARGUMENT' });
    await assert.rejects(
      z
        .transpose(0, 0)
        .narrow(0, 0, 2)
        .to('cuda:9' as never),
      { code: 'ERR_TP_INVALID_ARGUMENT' },
    );
    for (const t of [z, h, k]) t.release();
    assert.throws(() => z.fill(1), { code: 'ERR_TP_RELEASED' });
  });

  test('put and get in one process alias the same memory (torch: "likely a segfault")', async () => {
    const t = mp.full([256], 1, { device: 'cuda' });
    const q = new mp.Queue<mp.Tensor>();
    await q.put(t);
    const r = await q.get();
    r.fill(3);
    assert.equal(await first(t), 3);
    r.release();
    assert.equal(await first(t), 3, "releasing the received one leaves the sender's");
    t.release();
    q.close();
  });

  test('pinMemory: a shared segment registered in place, once, unregistered when unmapped', async () => {
    const before = mp.cuda.stats().pinnedRanges;
    const t = mp.full([4096], 1);
    assert.equal(t.isPinned(), false);
    t.pinMemory().pinMemory();
    assert.equal(t.isShared(), true);
    assert.equal(t.isPinned(), true);
    assert.equal(mp.cuda.stats().pinnedRanges, before + 1);
    const d = await t.cuda();
    assert.equal(await first(d), 1);
    d.release();
    t.release();
    mp.emptyCache();
    assert.equal(mp.cuda.stats().pinnedRanges, before);
  });

  test('DataLoader pinMemory: batches from workers arrive pinned, and copy to the device', async () => {
    const loader = new mp.DataLoader(
      { module: new URL('./fixtures/dataset.js', import.meta.url), export: 'ramp', args: [8] },
      { batchSize: 4, numWorkers: 1, pinMemory: true },
    );
    const sums: number[] = [];
    for await (const b of loader) {
      const batch = b as mp.Tensor;
      assert.equal(batch.isPinned(), true);
      const d = await batch.cuda();
      sums.push(((await d.cpu()).toArray() as number[][]).flat().reduce((a, x) => a + x, 0));
      d.release();
      batch.release();
    }
    await loader.close();
    assert.deepEqual(sums, [12, 44]);
  });

  for (const strategy of ['file_descriptor', 'file_system'] as const) {
    test(`${strategy}: writes seen both ways; the consumer's release returns the chunk to the producer's cache`, async () => {
      mp.setSharingStrategy(strategy);
      mp.cuda.emptyCache();
      const t = mp.full([1 << 16], 1, { device: 'cuda' });
      const q = new mp.Queue();
      const back = new mp.Queue();
      const go = new mp.Event();
      const ctx = mp.spawn(target('writeBack'), { args: [q, back, go, 2], join: false });
      await q.put(t);
      const seen = (await back.get()) as { seen: number; device: string; isShared: boolean };
      assert.deepEqual(seen, { seen: 1, device: 'cuda:0', isShared: true });
      assert.equal(await first(t), 2, "the consumer's write is the producer's");
      t.release();
      assert.equal(mp.cuda.stats().busy, 1, 'held by the consumer: busy, not reusable');
      go.set();
      assert.equal(await back.get(), 'released');
      assert.equal(await ctx.join(), true);
      const again = mp.empty([1 << 16], { device: 'cuda' });
      assert.deepEqual([mp.cuda.stats().busy, mp.cuda.stats().chunks], [0, 1], 'the same chunk, reused');
      again.release();
      for (const o of [q, back, go]) o.close();
      mp.setSharingStrategy('file_descriptor');
    });
  }

  test('rule 2 is not needed: a producer SIGKILLed after sending, one message read and one not', async () => {
    const q = new mp.Queue<mp.Tensor>();
    const back = new mp.Queue();
    const never = new mp.Event();
    const ctx = mp.spawn(target('produceAndHang'), { args: [q, back, never], join: false });
    assert.equal(await back.get(), 'sent');
    const a = await q.get();
    process.kill(ctx.pids()[0]!, 'SIGKILL');
    await assert.rejects(ctx.join(), { code: 'ERR_TP_PROCESS_EXITED' });
    const b = await q.get(); // read only after its producer died
    assert.deepEqual([await first(a), await first(b)], [5, 6]);
    a.fill(8);
    assert.equal(await first(a), 8);
    a.release();
    b.release();
    for (const o of [q, back, never]) o.close();
  });

  test('rule 1 is advice: a consumer SIGKILLed holding a tensor; the owner takes its slot back', async () => {
    mp.cuda.emptyCache();
    const t = mp.full([1024], 1, { device: 'cuda' });
    const q = new mp.Queue();
    const back = new mp.Queue();
    const never = new mp.Event();
    const ctx = mp.spawn(target('holdAndHang'), { args: [q, back, never], join: false });
    await q.put(t);
    assert.equal(await back.get(), 'cuda:0');
    process.kill(ctx.pids()[0]!, 'SIGKILL');
    await assert.rejects(ctx.join(), { code: 'ERR_TP_PROCESS_EXITED' });
    t.release();
    assert.equal(mp.cuda.stats().busy, 1);
    const next = mp.empty([1024], { device: 'cuda' }); // finds no free chunk: takes back the dead holder's slot
    assert.deepEqual([mp.cuda.stats().busy, mp.cuda.stats().chunks], [0, 1]);
    next.release();
    for (const o of [q, back, never]) o.close();
  });

  test('rule 3 is not needed: a received tensor passed on, read by a third process after both others let go', async () => {
    const t = mp.full([1024], 4, { device: 'cuda' });
    const q1 = new mp.Queue();
    const q2 = new mp.Queue();
    const back = new mp.Queue();
    const fwd = mp.spawn(target('forward'), { args: [q1, q2], join: false });
    await q1.put(t);
    t.release();
    mp.cuda.emptyCache(); // the owner lets go too
    assert.equal(await fwd.join(), true);
    const reader = mp.spawn(target('readForwarded'), { args: [q2, back], join: false });
    assert.deepEqual(await back.get(), [4, 9]);
    assert.equal(await reader.join(), true);
    for (const o of [q1, q2, back]) o.close();
  });

  test('spawn arguments carry a CUDA tensor', async () => {
    const t = mp.zeros([64], { device: 'cuda' });
    const done = new mp.Event();
    await mp.spawn(target('fillArg'), { args: [t, done, 5] });
    assert.equal(await first(t), 5);
    t.release();
    done.close();
  });

  test('Pool tasks and results carry CUDA tensors both ways', async () => {
    const tasks = new URL('./fixtures/tasks.js', import.meta.url);
    const t = mp.zeros([256], { device: 'cuda' });
    {
      await using pool = new mp.Pool({ processes: 1 });
      const [back] = await pool.map<mp.Tensor>({ module: tasks, export: 'fillAndReturn' }, [t]);
      assert.equal(await first(t), 3, "the worker's fill is in the parent's tensor");
      assert.equal(back!.device, 'cuda:0');
      back!.release();
      const made = await pool.map<mp.Tensor>({ module: tasks, export: 'makeOnDevice' }, [4, 8]);
      assert.deepEqual(await Promise.all(made.map(first)), [4, 8]);
      for (const m of made) m.release();
    }
    t.release();
  });

  test('hostile CUDA entries are coded errors and leave no descriptor', () => {
    const [a, b] = addon.socketpair();
    assert.throws(() => importChunk(a, b, 0, 16, 2 ** 21), { name: 'BadHandleError', code: 'ERR_TP_BAD_HANDLE' });
    const [c, d] = addon.socketpair();
    assert.throws(() => importChunk(c, d, 2 ** 21, 16, 2 ** 21), { code: 'ERR_TP_BAD_HANDLE' });
  });

  test('1,000 round trips: chunks, mappings and descriptors back to where they started', async () => {
    mp.cuda.emptyCache();
    const n = 1000;
    const fds = openFds().size;
    // Device memory: meaningful on a device only (the stand-in's figure is the machine's Shmem).
    const freeBefore = REAL ? mp.cuda.memGetInfo().free : 0;
    const t = mp.full([1 << 10], 1, { device: 'cuda' });
    const q = new mp.Queue();
    const back = new mp.Queue();
    const ctx = mp.spawn(target('echo'), { args: [q, back, n], join: false });
    for (let k = 0; k < n; k++) {
      await q.put(t);
      const r = (await back.get()) as mp.Tensor;
      if (r.storage !== t.storage) r.release();
    }
    const child = (await back.get()) as { chunks: number; mapped: number };
    assert.deepEqual([child.chunks, child.mapped], [0, 0], 'the echo process kept nothing');
    assert.equal(await ctx.join(), true);
    assert.equal(await first(t), 1);
    t.release();
    assert.equal(mp.cuda.stats().busy, 0);
    mp.cuda.emptyCache();
    assert.deepEqual([mp.cuda.stats().chunks, mp.cuda.stats().mapped], [0, 0]);
    if (REAL) {
      const g = mp.cuda.status().devices[0]!.granularity;
      const freeAfter = mp.cuda.memGetInfo().free;
      assert.ok(Math.abs(freeAfter - freeBefore) <= 2 * g, `device memory free before ${freeBefore}, after ${freeAfter}`);
    }
    q.close();
    back.close();
    assert.ok(openFds().size <= fds, 'no descriptor left');
  });
});
