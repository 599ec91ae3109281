// Default collate and convert, as torch's default_collate / default_convert: tensors stacked
// into shared memory, numbers into int32 or float64, structures recursed, mismatches refused
// with a CollateError naming where.
import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import * as mp from '../../src/index.js';
import { throwsCoded } from '../helpers/errors.js';
import { checkLeaks } from '../helpers/leaks.js';

checkLeaks();

const collateError = (fn: () => unknown, path: string): void => {
  const e = throwsCoded(fn, mp.CollateError, 'ERR_TP_COLLATE');
  assert.equal(e.path, path);
  assert.ok(e.message.includes(path), e.message);
};

describe('defaultCollate', () => {
  test('tensors: stacked along a new first dimension into one shared tensor, each sample copied', () => {
    fc.assert(fc.property(fc.integer({ min: 1, max: 6 }), fc.array(fc.integer({ min: 1, max: 4 }), { maxLength: 3 }), (b, shape) => {
      const samples = Array.from({ length: b }, (_, i) => mp.full(shape, i + 0.5, { dtype: 'float64' }));
      const out = mp.defaultCollate(samples) as mp.Tensor;
      assert.deepEqual(out.shape, [b, ...shape]);
      assert.equal(out.dtype, 'float64');
      assert.equal(out.isShared(), true);
      for (let i = 0; i < b; i++) assert.deepEqual(out.select(0, i).toArray(), samples[i]!.toArray());
      samples[0]!.fill(99); // a copy, not a view of the samples
      assert.notEqual(out.select(0, 0).contiguous().data[0], 99);
      out.release();
    }));
  });

  test('non-contiguous samples (a transposed view) are stacked by value', () => {
    const t = mp.tensor([[1, 2, 3], [4, 5, 6]]).transpose(0, 1);
    const out = mp.defaultCollate([t, t]) as mp.Tensor;
    assert.deepEqual(out.toArray(), [[[1, 4], [2, 5], [3, 6]], [[1, 4], [2, 5], [3, 6]]]);
    out.release();
  });

  test('numbers: int32 when all are integers that fit, else float64; bigints int64; booleans bool; strings stay a list', () => {
    const ints = mp.defaultCollate([1, 2, -3]) as mp.Tensor;
    assert.equal(ints.dtype, 'int32');
    assert.deepEqual(ints.toArray(), [1, 2, -3]);
    const floats = mp.defaultCollate([1, 2.5]) as mp.Tensor;
    assert.equal(floats.dtype, 'float64');
    assert.deepEqual(floats.toArray(), [1, 2.5]);
    assert.equal((mp.defaultCollate([1, 2 ** 31]) as mp.Tensor).dtype, 'float64');
    assert.equal((mp.defaultCollate([1, NaN]) as mp.Tensor).dtype, 'float64');
    const big = mp.defaultCollate([1n, 2n]) as mp.Tensor;
    assert.equal(big.dtype, 'int64');
    assert.deepEqual(big.toArray(), [1n, 2n]);
    const bools = mp.defaultCollate([true, false]) as mp.Tensor;
    assert.equal(bools.dtype, 'bool');
    assert.deepEqual(bools.toArray(), [true, false]);
    assert.ok(ints.isShared() && floats.isShared() && big.isShared() && bools.isShared());
    assert.deepEqual(mp.defaultCollate(['a', 'b']), ['a', 'b']);
  });

  test('TypedArrays are stacked like tensors of their dtype', () => {
    const out = mp.defaultCollate([new Uint8Array([1, 2]), new Uint8Array([3, 4])]) as mp.Tensor;
    assert.equal(out.dtype, 'uint8');
    assert.deepEqual(out.toArray(), [[1, 2], [3, 4]]);
  });

  test('arrays (tuples) are transposed, plain objects and Maps collated per key, recursively', () => {
    const batch = [
      [mp.full([2], 1), { label: 3, meta: { name: 'a', w: 0.5 } }],
      [mp.full([2], 2), { label: 4, meta: { name: 'b', w: 1 } }],
    ];
    const [x, rest] = mp.defaultCollate(batch) as [mp.Tensor, { label: mp.Tensor; meta: { name: string[]; w: mp.Tensor } }];
    assert.deepEqual(x.toArray(), [[1, 1], [2, 2]]);
    assert.deepEqual(rest.label.toArray(), [3, 4]);
    assert.deepEqual(rest.meta.name, ['a', 'b']);
    assert.equal(rest.meta.w.dtype, 'float64');
    const m = mp.defaultCollate([new Map([['k', 1]]), new Map([['k', 2]])]) as Map<string, mp.Tensor>;
    assert.deepEqual(m.get('k')!.toArray(), [1, 2]);
  });

  test('mismatches are CollateErrors that name the path', () => {
    collateError(() => mp.defaultCollate([mp.zeros([2]), mp.zeros([3])]), 'batch');
    collateError(() => mp.defaultCollate([mp.zeros([2]), mp.zeros([2], { dtype: 'int32' })]), 'batch');
    collateError(() => mp.defaultCollate([{ a: [1, 2] }, { a: [1] }]), 'batch.a');
    collateError(() => mp.defaultCollate([{ a: 1, b: 2 }, { a: 1 }]), 'batch.b');
    collateError(() => mp.defaultCollate([[1, 'x'], [2, 3]]), 'batch[1]');
    collateError(() => mp.defaultCollate([{ d: new Date() }, { d: new Date() }]), 'batch.d');
    collateError(() => mp.defaultCollate([null, null]), 'batch');
    collateError(() => mp.defaultCollate([{ x: undefined }, { x: undefined }]), 'batch.x');
  });
});

describe('defaultConvert and releaseTensors', () => {
  test('defaultConvert wraps TypedArrays as tensors (no copy) and leaves the rest', () => {
    const a = new Float32Array([1, 2]);
    const out = mp.defaultConvert({ a, n: 3, s: 'x', l: [a] }) as { a: mp.Tensor; n: number; s: string; l: mp.Tensor[] };
    assert.ok(out.a instanceof mp.Tensor);
    a[0] = 7;
    assert.equal(out.a.get(0), 7);
    assert.equal(out.n, 3);
    assert.equal(out.s, 'x');
    assert.ok(out.l[0] instanceof mp.Tensor);
  });

  test('releaseTensors releases every tensor in a structure once', () => {
    const t = mp.zeros([2], { shared: true });
    const u = mp.zeros([2], { shared: true });
    const batch = { t, more: [u, t, 5], m: new Map([['u', u]]) };
    mp.releaseTensors(batch);
    throwsCoded(() => t.get(0), mp.ReleasedError, 'ERR_TP_RELEASED');
    throwsCoded(() => u.get(0), mp.ReleasedError, 'ERR_TP_RELEASED');
    mp.releaseTensors(batch); // released ones are skipped
  });
});
