// Node <-> Python (python/, docs/protocol.md): real Python processes against this one over
// Queues, under both strategies. Every dtype numpy has, with shapes and strides, arrives in
// Python as the dtype, shape and strides it has here and comes back over the same storage;
// writes are seen both ways; arrays Python makes (tensorproc.empty, a plain numpy array, a
// torch tensor) arrive here; what Python releases (explicitly, or by collecting it) leaves
// nothing busy here; a Python process killed while it holds tensors pins nothing.
import { test, describe, after, afterEach } from 'node:test';
import assert from 'node:assert/strict';
import * as mp from '../../src/index.js';
import { DTYPES, type DType } from '../../src/tensor/dtype.js';
import { segmentCache, receiveCache } from '../../src/sharing/index.js';
import { holders, W_UNWITNESSED } from '../../src/sharing/segment-header.js';
import { segmentOf } from '../helpers/segments.js';
import { checkLeaks, namesHeldBy } from '../helpers/leaks.js';
import { hasTorch, noPython, startPeer, type Peer } from './python-peer.js';

checkLeaks();
afterEach(() => mp.setSharingStrategy('file_descriptor'));

// numpy's names for tensorproc's dtypes are the same; bfloat16 arrives as uint16 words tagged bfloat16.

function sample(dtype: DType): mp.Tensor {
  const t = mp.empty([3, 4], { dtype, shared: true });
  for (let i = 0; i < 3; i++)
    for (let j = 0; j < 4; j++) {
      const v = i * 4 + j + 1;
      t.set(
        [i, j],
        dtype === 'bool'
          ? v % 2 === 1
          : dtype.startsWith('int64') || dtype.startsWith('uint64')
            ? BigInt(v)
            : dtype === 'float16' || dtype === 'bfloat16'
              ? v
              : v,
      );
    }
  return t;
}

interface Seen {
  dtype: string;
  shape: number[];
  stride: number[];
  first: unknown;
  last: unknown;
}

/** Segments of this process that another process still holds (a total past this process's own hold). */
function busy(): string[] {
  return segmentCache
    .busySegments()
    .filter((s) => s.refcount() > 1)
    .map((s) => `${s.capacity}: total ${s.refcount()}, slots ${JSON.stringify(holders(s.header))}`);
}

/** busy(), after housekeeping took back what dead processes held. */
function busyAfterHousekeeping(): string[] {
  receiveCache.clear();
  for (let i = 0; i < 4 && busy().length > 0; i++) segmentCache.housekeeping();
  return busy();
}

for (const strategy of ['file_descriptor', 'file_system'] as const) {
  describe(strategy, { skip: noPython }, () => {
    let peer: Peer | undefined;
    after(async () => {
      await peer?.close();
    });

    test('a tensor Python passes back is marked passed on (file_system) before its reference is added', async () => {
      mp.setSharingStrategy(strategy);
      peer ??= startPeer(strategy);
      const t = mp.full([1024], 5, { dtype: 'int32', shared: true }); // its own segment, not a slab piece
      const header = segmentOf(t).header;
      assert.equal(Atomics.load(header, W_UNWITNESSED), 0);
      const got: { value: mp.Tensor[] } = await peer.ask({ op: 'echo', value: [t] });
      // Python's message carried no witness of ours: under file_system the owner must never
      // take its reference back as lost in flight (protocol.md, "Witnesses"). Still held
      // here (t), so the mark is not cleared yet; file_descriptor messages carry the memfd.
      assert.equal(Atomics.load(header, W_UNWITNESSED), strategy === 'file_system' ? 1 : 0);
      assert.equal(got.value[0]!.get(1023), 5);
      got.value[0]!.release();
      t.release();
    });

    test('every dtype, shapes and strides, arrives as it is and comes back over the same storage', async () => {
      mp.setSharingStrategy(strategy);
      peer ??= startPeer(strategy);
      for (const d of DTYPES) {
        const t = sample(d);
        // contiguous, a transpose, a narrowed view with an offset, a 0-d element, an empty one
        const sent = [t, t.transpose(0, 1), t.narrow(1, 1, 2), t.select(0, 2).select(0, 3), t.narrow(0, 0, 0)];
        const got: { value: mp.Tensor[]; seen: Seen[] } = await peer!.ask({ op: 'echo', value: sent });
        for (let k = 0; k < sent.length; k++) {
          const s = sent[k]!;
          const b: mp.Tensor = got.value[k]!;
          const seen: Seen = got.seen[k]!;
          const where = `${d}[${k}]`;
          assert.equal(seen.dtype, d, where);
          assert.deepEqual(seen.shape, s.shape, where);
          if (s.numel() > 0) {
            assert.deepEqual(seen.stride, s.stride, where);
            const asPy = (v: unknown) => (typeof v === 'bigint' ? Number(v) : v);
            assert.equal(seen.first, asPy(s.get(...s.shape.map(() => 0))), `${where} first`);
            assert.equal(seen.last, asPy(s.get(...s.shape.map((n) => n - 1))), `${where} last`);
          }
          assert.equal(b.dtype, s.dtype, where);
          assert.deepEqual(b.shape, s.shape, where);
          if (s.numel() > 0) {
            assert.deepEqual([b.stride, b.offset], [s.stride, s.offset], where);
            assert.equal(b.storage, s.storage, `${where}: back over the same storage`);
          }
        }
        t.release();
      }
      // A lone tensor travels in a TENSOR frame both ways.
      const lone = sample('float32').narrow(0, 1, 2);
      const echoed = await peer!.ask<mp.Tensor>(lone);
      assert.equal(echoed.storage, lone.storage);
      assert.deepEqual([echoed.shape, echoed.stride, echoed.offset], [lone.shape, lone.stride, lone.offset]);
      // Plain values as JS has them.
      const plain = { s: 'héllo ✓', n: [1, -2.5, 2 ** 40, null, true, false], nested: { a: [[1], { b: 'c' }] } };
      assert.deepEqual((await peer!.ask<{ value: unknown }>({ op: 'echo', value: plain })).value, plain);
    });

    test('writes are seen both ways; arrays Python makes arrive here', async () => {
      const t = mp.zeros([2, 3], { dtype: 'float64', shared: true });
      assert.equal(await peer!.ask({ op: 'fill', t: t.narrow(1, 1, 2), v: 7 }), 'filled');
      assert.deepEqual(t.toArray(), [
        [0, 7, 7],
        [0, 7, 7],
      ]);
      const dtypes = DTYPES.filter((d) => d !== 'bfloat16');
      const made = await peer!.ask<Record<string, mp.Tensor | boolean | null>>({ op: 'make', dtypes });
      for (const d of dtypes) {
        const a = made[d] as mp.Tensor;
        assert.equal(a.dtype, d);
        assert.deepEqual(a.shape, [3, 4]);
        const want = d === 'bool' ? true : d.endsWith('int64') ? 11n : 11;
        assert.equal(a.get(2, 3), want, d);
      }
      const strided = made.strided as mp.Tensor;
      assert.deepEqual([strided.shape, strided.stride, strided.offset], [[3, 4], [1, 6], 1]);
      assert.deepEqual((strided.toArray() as number[][])[0], [1, 7, 13, 19]);
      assert.deepEqual((made.copied as mp.Tensor).toArray(), [0, 3, 6, 9, 12]);
      const shared = made.shared as mp.Tensor;
      shared.fill(9);
      if (hasTorch) {
        assert.deepEqual((made.torch as mp.Tensor).toArray(), [
          [0, 1, 2],
          [3, 4, 5],
        ]);
      }
      const read = await peer!.ask<{ shared: number[]; torch_shared: boolean | null }>({ op: 'read' });
      assert.deepEqual(read.shared, new Array(8).fill(9), 'a write here is seen by Python');
      if (hasTorch) {
        assert.equal(read.torch_shared, true, 'a torch tensor put once now lives in shared memory');
        const r = await peer!.ask<{ ptr_same: boolean }>({ op: 'torch', t });
        assert.equal(r.ptr_same, true, 'torch.from_numpy wraps the received memory');
        assert.equal(t.get(0, 1), 8);
      }
    });

    test('what Python releases, explicitly or by collecting it, leaves nothing busy here', async () => {
      const sent = [mp.full([1 << 16], 1, { dtype: 'float32', shared: true }), mp.full([16], 2, { dtype: 'int32', shared: true })];
      assert.equal(await peer!.ask({ op: 'hold', value: sent }), 1);
      for (const t of sent) t.release();
      assert.ok(busy().length > 0, 'held in Python');
      assert.equal(await peer!.ask({ op: 'drop' }), 'dropped');
      // After housekeeping: a slot of a process that died earlier in this file (the killed peer of
      // the other strategy's suite) may sit on this process's slab until the slab is closed and
      // reaches the cache, which GC decides (CI, 2026-12-05/06); housekeeping takes those back,
      // and never a live holder's slot, so what this checks is what the live peer released.
      assert.deepEqual(busyAfterHousekeeping(), [], 'released by Python');
      // Collected: the arrays of a message die with it in Python.
      const x = mp.full([4096], 3, { dtype: 'int16', shared: true });
      assert.equal(await peer!.ask({ op: 'size', value: [x] }), 4096);
      x.release();
      assert.deepEqual(busyAfterHousekeeping(), [], 'collected in Python');
      await peer!.close();
      peer = undefined;
    });

    test('a Python process killed while it holds tensors pins nothing', async () => {
      const killed = startPeer(strategy);
      try {
        for (let i = 0; i < 4; i++) {
          const value = [mp.full([1 << 18], i, { dtype: 'float32', shared: true }), mp.full([8], i, { dtype: 'int32', shared: true })];
          await killed.ask({ op: 'hold', value });
          for (const t of value) t.release();
        }
        assert.ok(busy().length > 0, 'held in Python');
        killed.proc.kill('SIGKILL');
        await killed.exited;
      } finally {
        await killed.close();
      }
      assert.deepEqual(busyAfterHousekeeping(), []);
      if (strategy === 'file_system') assert.deepEqual(namesHeldBy(killed.proc.pid!), []);
      mp.emptyCache();
    });
  });
}
