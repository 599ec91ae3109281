import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import * as mp from 'tensorproc';
import { checkLeaks } from '../helpers/leaks.js';
import { isCoded, throwsCoded } from '../helpers/errors.js';

checkLeaks();

const expectCode = (fn: () => unknown, cls: abstract new (...a: any[]) => Error, code: string) => throwsCoded(fn, cls, code);

describe('factories and dtypes', () => {
  test('empty/zeros/full have torch shapes and strides', () => {
    const t = mp.zeros([2, 3, 4]);
    assert.deepEqual(t.shape, [2, 3, 4]);
    assert.deepEqual(t.stride, [12, 4, 1]);
    assert.equal(t.offset, 0);
    assert.equal(t.numel(), 24);
    assert.equal(t.dtype, 'float32');
    assert.ok(t.isContiguous());
    assert.equal(t.isShared(), false);
    assert.equal(t.storage.nbytes, 96);
    assert.deepEqual(mp.full([2], 7, { dtype: 'int16' }).toArray(), [7, 7]);
    assert.equal(mp.empty([]).numel(), 1, 'a 0-d tensor has one element');
    assert.equal(mp.empty([3, 0]).numel(), 0);
  });

  test('empty() leaves private memory as it was (torch.empty), zeros() always zeroes it', () => {
    // NOTE [Uninitialized private memory]: empty() takes malloc'd memory, so what the process
    // freed before may show through; zeros() must not. Freed bytes of 0xff first, then both.
    for (let k = 0; k < 64; k++) mp.empty([4096], { dtype: 'uint8' }).fill(255);
    for (const n of [1, 7, 4096, 1 << 20]) {
      globalThis.gc?.();
      const z = mp.zeros([n], { dtype: 'uint8' });
      assert.ok(
        (z.data as Uint8Array).every((b) => b === 0),
        `zeros([${n}]) is all zeros`,
      );
    }
    // Each empty() owns its whole ArrayBuffer (Buffer.allocUnsafeSlow, never Buffer's shared pool).
    const a = mp.empty([3], { dtype: 'uint8' }).fill(1);
    const b = mp.empty([3], { dtype: 'uint8' }).fill(2);
    assert.notEqual(a.storage.buffer, b.storage.buffer);
    assert.equal(a.storage.buffer.byteLength, 3);
    assert.deepEqual(
      [a.toArray(), b.toArray()],
      [
        [1, 1, 1],
        [2, 2, 2],
      ],
    );
    const c = mp
      .tensor([1, 2, 3, 4, 5, 6], { shape: [2, 3] })
      .transpose(0, 1)
      .clone();
    assert.deepEqual(
      c.toArray(),
      [
        [1, 4],
        [2, 5],
        [3, 6],
      ],
      'clone() writes every element of its new memory',
    );
  });

  test('all 13 dtypes store and read back', () => {
    const cases: [mp.DType, mp.Scalar, mp.Scalar][] = [
      ['float32', 1.5, 1.5],
      ['float64', 1 / 3, 1 / 3],
      ['int8', -5, -5],
      ['uint8', 250, 250],
      ['int16', -300, -300],
      ['uint16', 65000, 65000],
      ['int32', -7e8, -7e8],
      ['uint32', 4e9, 4e9],
      ['int64', -(2n ** 40n), -(2n ** 40n)],
      ['uint64', 2n ** 63n, 2n ** 63n],
      ['bool', true, true],
      ['float16', 0.333, 0.3330078125],
      ['bfloat16', 3.14159, 3.140625],
    ];
    assert.equal(mp.DTYPES.length, 13);
    for (const [dtype, v, back] of cases) {
      const t = mp.zeros([2], { dtype });
      t.set([1], v);
      assert.equal(t.get(1), back, dtype);
      assert.equal(t.storage.nbytes, 2 * t.data.BYTES_PER_ELEMENT, dtype);
    }
  });

  test('16-bit floats: specials and raw words', () => {
    const h = mp.tensor([1, -2, 65504, 1e-7, Infinity, NaN], { dtype: 'float16' });
    assert.deepEqual(Array.from(h.data as Uint16Array).slice(0, 3), [0x3c00, 0xc000, 0x7bff]);
    const back = h.toArray() as number[];
    assert.equal(back[3], 1.1920928955078125e-7);
    assert.equal(back[4], Infinity);
    assert.ok(Number.isNaN(back[5]));
    const b = mp.tensor([1, -2, NaN], { dtype: 'bfloat16' });
    assert.deepEqual(Array.from(b.data as Uint16Array).slice(0, 2), [0x3f80, 0xc000]);
    assert.ok(Number.isNaN(b.get(2) as number));
  });

  test('tensor() wraps TypedArrays without a copy and copies arrays', () => {
    const a = new Float32Array([1, 2, 3, 4, 5, 6]);
    const t = mp.tensor(a, { shape: [2, 3] });
    a[4] = 50;
    assert.equal(t.get(1, 1), 50);
    t.set([0, 0], 9);
    assert.equal(a[0], 9);
    const sub = mp.tensor(new Int32Array([1, 2, 3, 4]).subarray(1, 3));
    assert.deepEqual(sub.toArray(), [2, 3]);
    assert.deepEqual(
      mp.tensor([
        [1, 2],
        [3, 4],
      ]).shape,
      [2, 2],
    );
    assert.equal(mp.tensor([1n, 2n]).dtype, 'int64');
    assert.equal(mp.tensor([true, false]).dtype, 'bool');
    assert.equal(mp.tensor(new Uint16Array(2), { dtype: 'bfloat16' }).dtype, 'bfloat16');
    assert.deepEqual(mp.tensor([]).shape, [0]);
    assert.deepEqual(mp.tensor([[]]).shape, [1, 0]);
  });
});

describe('views share storage', () => {
  const base = () =>
    mp.tensor(
      Float32Array.from({ length: 24 }, (_, i) => i),
      { shape: [2, 3, 4] },
    );

  test('select, narrow, transpose, view, reshape', () => {
    const t = base();
    const s = t.select(1, 2);
    assert.deepEqual(s.shape, [2, 4]);
    assert.deepEqual(s.stride, [12, 1]);
    assert.equal(s.offset, 8);
    assert.deepEqual(s.toArray(), [
      [8, 9, 10, 11],
      [20, 21, 22, 23],
    ]);
    const n = t.narrow(2, 1, 2);
    assert.deepEqual(n.shape, [2, 3, 2]);
    assert.equal(n.get(1, 2, 1), 22);
    assert.equal(n.isContiguous(), false);
    const tr = t.transpose(0, 2);
    assert.deepEqual(tr.shape, [4, 3, 2]);
    assert.deepEqual(tr.stride, [1, 4, 12]);
    assert.equal(tr.get(3, 1, 1), t.get(1, 1, 3));
    assert.deepEqual(t.view(6, -1).shape, [6, 4]);
    assert.deepEqual(t.view([4, 6]).shape, [4, 6]);
    const r = tr.reshape(-1);
    assert.equal(r.storage === t.storage, false, 'reshape of a non-contiguous tensor copies');
    // tr[i][j][k] = t[k][j][i] = 12k + 4j + i, read in row-major order of tr
    assert.deepEqual(r.toArray(), [0, 12, 4, 16, 8, 20, 1, 13, 5, 17, 9, 21, 2, 14, 6, 18, 10, 22, 3, 15, 7, 19, 11, 23]);
    // writes through a view reach every other view of the storage
    s.set([0, 0], -1);
    assert.equal(t.get(0, 2, 0), -1);
    assert.equal(tr.get(0, 2, 0), -1);
    assert.equal(s.storage, t.storage);
  });

  test('fill, copy, clone, contiguous on strided views', () => {
    const t = base();
    t.narrow(2, 0, 1).fill(100);
    assert.deepEqual(t.select(0, 0).select(1, 0).toArray(), [100, 100, 100]);
    const c = t.transpose(1, 2).clone();
    assert.ok(c.isContiguous());
    assert.notEqual(c.storage, t.storage);
    assert.deepEqual(c.toArray(), t.transpose(1, 2).toArray());
    const i = mp.zeros([2, 4, 3], { dtype: 'int64' }).copy(t.transpose(1, 2));
    assert.equal(i.get(1, 3, 2), 23n);
    assert.throws(() => t.transpose(0, 1).data, isCoded(mp.NotContiguousError, 'ERR_TP_NOT_CONTIGUOUS'));
    assert.throws(() => t.transpose(0, 1).view(-1), isCoded(mp.NotContiguousError, 'ERR_TP_NOT_CONTIGUOUS'));
    assert.equal(t.contiguous(), t);
    assert.equal(t.select(0, 1).data.length, 12);
    assert.equal((t.select(0, 1).data as Float32Array)[1], 13);
  });
});

describe('0-d and empty tensors, as torch', () => {
  test('select and narrow refuse a 0-d tensor; transpose(0, 0) is the tensor', () => {
    const s = mp.full([], 5);
    expectCode(() => s.select(0, 0), mp.IndexOutOfRangeError, 'ERR_TP_INDEX_OUT_OF_RANGE');
    expectCode(() => s.select(-1, 0), mp.IndexOutOfRangeError, 'ERR_TP_INDEX_OUT_OF_RANGE');
    expectCode(() => s.narrow(0, 0, 1), mp.IndexOutOfRangeError, 'ERR_TP_INDEX_OUT_OF_RANGE');
    expectCode(() => s.narrow(0, 0, 0), mp.IndexOutOfRangeError, 'ERR_TP_INDEX_OUT_OF_RANGE');
    for (const [a, b] of [
      [0, 0],
      [-1, 0],
      [-1, -1],
    ]) {
      const t = s.transpose(a!, b!);
      assert.deepEqual(t.shape, []);
      assert.deepEqual(t.stride, []);
      assert.equal(t.get(), 5);
    }
    expectCode(() => s.transpose(0, 1), mp.IndexOutOfRangeError, 'ERR_TP_INDEX_OUT_OF_RANGE');
    assert.match(
      (() => {
        try {
          s.transpose(1, 0);
        } catch (e) {
          return (e as Error).message;
        }
        return '';
      })(),
      /-1\.\.0/,
    );
  });

  test('a tensor with no elements is contiguous, whatever its strides', () => {
    const e = mp.zeros([3, 0]).transpose(0, 1);
    assert.deepEqual(e.stride, [1, 1]);
    assert.equal(e.isContiguous(), true);
    assert.equal(e.data.length, 0);
    assert.deepEqual(e.view(-1, 3).shape, [0, 3]);
    // an empty view whose offset lies past the end of its storage
    const past = mp.zeros([2, 3]).narrow(1, 1, 2).narrow(0, 2, 0);
    assert.equal(past.offset, 7);
    assert.equal(past.data.length, 0);
    assert.deepEqual(past.toArray(), []);
  });
});

describe('conversions, as torch', () => {
  test('to bool, non-zero is true: NaN included', () => {
    const b = mp.zeros([3], { dtype: 'bool' });
    b.set([0], NaN).set([1], -0).set([2], 0.5);
    assert.deepEqual(b.toArray(), [true, false, true]);
    assert.deepEqual(
      mp
        .zeros([2], { dtype: 'bool' })
        .copy(mp.tensor([NaN, 0], { dtype: 'float64' }))
        .toArray(),
      [true, false],
    );
    assert.deepEqual(mp.full([1], NaN, { dtype: 'bool' }).toArray(), [true]);
  });
});

describe('copies keep shared buffers internal', () => {
  test('copy() and clone() do not cost a recycled lease its buffer', () => {
    // 1 KiB: above PACK_BYTES, a segment of its own (a packed piece keeps no buffer for reuse: NOTE [Packed small storages]).
    const a = mp.full([256], 1, { shared: true });
    const buf = a.storage.internalBuffer;
    const b = mp.zeros([256]).copy(a);
    a.copy(b.fill(2));
    assert.deepEqual(a.clone().toArray(), Array(256).fill(2));
    a.release();
    const c = mp.empty([256], { shared: true });
    assert.equal(c.storage.internalBuffer, buf, 'the lease buffer never reached user code, so it is reused');
    c.release();
    // same-dtype copies between contiguous views at offsets
    const t = mp.tensor([0, 1, 2, 3, 4, 5]);
    t.narrow(0, 3, 3).copy(t.narrow(0, 0, 3));
    assert.deepEqual(t.toArray(), [0, 1, 2, 0, 1, 2]);
    const empty = mp.zeros([2, 3]).narrow(1, 1, 2).narrow(0, 2, 0);
    assert.equal(empty.copy(mp.zeros([0, 2])), empty);
  });
});

describe('bad input is a coded error', () => {
  test('dtype, shape, index, values', () => {
    expectCode(() => mp.zeros([2], { dtype: 'float8' as mp.DType }), mp.InvalidDtypeError, 'ERR_TP_INVALID_DTYPE');
    expectCode(() => mp.zeros([2], { dtype: 'toString' as mp.DType }), mp.InvalidDtypeError, 'ERR_TP_INVALID_DTYPE');
    expectCode(() => mp.zeros([-1]), mp.InvalidShapeError, 'ERR_TP_INVALID_SHAPE');
    expectCode(() => mp.zeros([1.5]), mp.InvalidShapeError, 'ERR_TP_INVALID_SHAPE');
    expectCode(() => mp.zeros(['2' as unknown as number]), mp.InvalidShapeError, 'ERR_TP_INVALID_SHAPE');
    expectCode(() => mp.zeros([2 ** 40, 2 ** 40]), mp.InvalidShapeError, 'ERR_TP_INVALID_SHAPE');
    expectCode(() => mp.zeros([2 ** 50]), mp.InvalidShapeError, 'ERR_TP_INVALID_SHAPE');
    const t = mp.zeros([2, 3]);
    expectCode(() => t.get(2, 0), mp.IndexOutOfRangeError, 'ERR_TP_INDEX_OUT_OF_RANGE');
    expectCode(() => t.get(0), mp.IndexOutOfRangeError, 'ERR_TP_INDEX_OUT_OF_RANGE');
    expectCode(() => t.get(0, 0.5), mp.IndexOutOfRangeError, 'ERR_TP_INDEX_OUT_OF_RANGE');
    expectCode(() => t.select(2, 0), mp.IndexOutOfRangeError, 'ERR_TP_INDEX_OUT_OF_RANGE');
    expectCode(() => t.narrow(1, 2, 2), mp.IndexOutOfRangeError, 'ERR_TP_INDEX_OUT_OF_RANGE');
    expectCode(() => t.view(4, -1), mp.InvalidShapeError, 'ERR_TP_INVALID_SHAPE');
    expectCode(() => t.view(-1, -1), mp.InvalidShapeError, 'ERR_TP_INVALID_SHAPE');
    expectCode(() => mp.zeros([1], { dtype: 'int64' }).set([0], 1.5), mp.InvalidArgumentError, 'ERR_TP_INVALID_ARGUMENT');
    expectCode(() => t.set([0, 0], 'x' as unknown as number), mp.InvalidArgumentError, 'ERR_TP_INVALID_ARGUMENT');
    expectCode(() => mp.tensor([[1, 2], [3]]), mp.InvalidArgumentError, 'ERR_TP_INVALID_ARGUMENT');
    expectCode(() => mp.tensor([[1, 2], 3]), mp.InvalidArgumentError, 'ERR_TP_INVALID_ARGUMENT');
    expectCode(() => mp.tensor(new Float32Array(4), { dtype: 'int32' }), mp.InvalidDtypeError, 'ERR_TP_INVALID_DTYPE');
    expectCode(() => mp.tensor(new Float32Array(4), { shape: [3] }), mp.InvalidArgumentError, 'ERR_TP_INVALID_ARGUMENT');
    expectCode(() => t.copy(mp.zeros([3, 2])), mp.InvalidShapeError, 'ERR_TP_INVALID_SHAPE');
  });

  test('release twice and use after release', () => {
    for (const shared of [false, true]) {
      const t = mp.zeros([4], { shared });
      const v = t.view(2, 2);
      const raw = t.data;
      t.release();
      // Emptied: a shared one so that it cannot see a recycled segment, a private one because
      // its memory is freed now (NOTE [Releasing private memory]).
      assert.equal(raw.length, 0, 'the released buffer is emptied');
      // Releasing again is a no-op, as `del` is (torch) and close() is: the same tensor, a
      // view of it, its storage.
      t.release();
      v.release();
      t.storage.release();
      expectCode(() => t.get(0), mp.ReleasedError, 'ERR_TP_RELEASED');
      expectCode(() => t.data, mp.ReleasedError, 'ERR_TP_RELEASED');
      expectCode(() => v.fill(1), mp.ReleasedError, 'ERR_TP_RELEASED');
      expectCode(() => t.select(0, 0), mp.ReleasedError, 'ERR_TP_RELEASED');
      expectCode(() => t.view(4), mp.ReleasedError, 'ERR_TP_RELEASED');
      expectCode(() => v.transpose(0, 1), mp.ReleasedError, 'ERR_TP_RELEASED');
      expectCode(() => t.shareMemory(), mp.ReleasedError, 'ERR_TP_RELEASED');
      t[Symbol.dispose](); // disposing a released tensor is allowed
    }
  });

  test('two `using` over one storage, and a view released before its base: no error', () => {
    for (const shared of [false, true]) {
      const t = mp.zeros([2, 3], { shared });
      {
        using a = t;
        using b = t.select(0, 1);
        b.fill(1);
        assert.equal(a.get(1, 2), 1);
      }
      expectCode(() => t.get(0, 0), mp.ReleasedError, 'ERR_TP_RELEASED');
      const x = mp.zeros([4], { shared });
      const w = x.narrow(0, 1, 2);
      x.release();
      w.release();
    }
  });

  test('using releases at the end of the scope', () => {
    let escaped: mp.Tensor;
    {
      using t = mp.zeros([3], { shared: true });
      escaped = t;
      assert.ok(t.isShared());
    }
    expectCode(() => escaped.get(0), mp.ReleasedError, 'ERR_TP_RELEASED');
  });
});

describe('shareMemory', () => {
  test('moves the storage in place, views follow, no-op when shared', () => {
    const t = mp.tensor([1, 2, 3, 4], { shape: [2, 2] });
    const row = t.select(0, 1);
    assert.equal(t.shareMemory(), t);
    assert.ok(t.isShared());
    assert.ok(row.isShared(), 'views share the storage, so they are shared too');
    assert.deepEqual(row.toArray(), [3, 4]);
    row.set([0], 30);
    assert.equal(t.get(1, 0), 30);
    const backing = t.storage.backing;
    t.shareMemory();
    assert.equal(t.storage.backing, backing);
    t.release();
  });
});

test('coded errors keep the built-in classes they extend', () => {
  for (const C of [
    mp.InvalidStrategyError,
    mp.InvalidDtypeError,
    mp.InvalidArgumentError,
    mp.TargetNotFoundError,
    mp.TargetNotFunctionError,
    mp.TargetIsEntryError,
    mp.NotTransferableError,
  ]) {
    assert.ok(C.prototype instanceof TypeError, `${C.name} is a TypeError`);
  }
  for (const C of [mp.InvalidShapeError, mp.IndexOutOfRangeError, mp.TooManyDescriptorsError]) {
    assert.ok(C.prototype instanceof RangeError, `${C.name} is a RangeError`);
  }
});
