// Default collate and convert, as torch's default_collate / default_convert: tensors stacked
// into shared memory, numbers into int32 or float64, structures recursed, mismatches refused
// with a CollateError naming where. CollateStream (the samples taken as they come) gives
// exactly defaultCollate's batches and errors.
import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import * as mp from '../../src/index.js';
import { throwsCoded } from '../helpers/errors.js';
import { checkLeaks } from '../helpers/leaks.js';
import { CollateStream } from '../../src/data/collate-stream.js';

checkLeaks();

const collateError = (fn: () => unknown, path: string): void => {
  const e = throwsCoded(fn, mp.CollateError, 'ERR_TP_COLLATE');
  assert.equal(e.path, path);
  assert.ok(e.message.includes(path), e.message);
};

describe('defaultCollate', () => {
  test('tensors: stacked along a new first dimension into one shared tensor, each sample copied', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 6 }), fc.array(fc.integer({ min: 1, max: 4 }), { maxLength: 3 }), (b, shape) => {
        const samples = Array.from({ length: b }, (_, i) => mp.full(shape, i + 0.5, { dtype: 'float64' }));
        const out = mp.defaultCollate(samples) as mp.Tensor;
        assert.deepEqual(out.shape, [b, ...shape]);
        assert.equal(out.dtype, 'float64');
        assert.equal(out.isShared(), true);
        for (let i = 0; i < b; i++) assert.deepEqual(out.select(0, i).toArray(), samples[i]!.toArray());
        samples[0]!.fill(99); // a copy, not a view of the samples
        assert.notEqual(out.select(0, 0).contiguous().data[0], 99);
        out.release();
      }),
    );
  });

  test('non-contiguous samples (a transposed view) are stacked by value', () => {
    const t = mp
      .tensor([
        [1, 2, 3],
        [4, 5, 6],
      ])
      .transpose(0, 1);
    const out = mp.defaultCollate([t, t]) as mp.Tensor;
    assert.deepEqual(out.toArray(), [
      [
        [1, 4],
        [2, 5],
        [3, 6],
      ],
      [
        [1, 4],
        [2, 5],
        [3, 6],
      ],
    ]);
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
    assert.deepEqual(out.toArray(), [
      [1, 2],
      [3, 4],
    ]);
  });

  test('arrays (tuples) are transposed, plain objects and Maps collated per key, recursively', () => {
    const batch = [
      [mp.full([2], 1), { label: 3, meta: { name: 'a', w: 0.5 } }],
      [mp.full([2], 2), { label: 4, meta: { name: 'b', w: 1 } }],
    ];
    const [x, rest] = mp.defaultCollate(batch) as [mp.Tensor, { label: mp.Tensor; meta: { name: string[]; w: mp.Tensor } }];
    assert.deepEqual(x.toArray(), [
      [1, 1],
      [2, 2],
    ]);
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
    collateError(
      () =>
        mp.defaultCollate([
          [1, 'x'],
          [2, 3],
        ]),
      'batch[1]',
    );
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

/** CollateStream over `samples`, added one at a time. */
function streamed(samples: unknown[]): unknown {
  const s = new CollateStream(samples.length);
  for (const x of samples) s.add(x);
  return s.finish();
}

/** A comparable picture of a batch: tensors as [dtype, shape, values, shared]. */
function picture(b: unknown): unknown {
  if (b instanceof mp.Tensor) return ['tensor', b.dtype, b.shape, b.toArray(), b.isShared()];
  if (Array.isArray(b)) return b.map(picture);
  if (b instanceof Map) return ['map', [...b].map(([k, v]) => [k, picture(v)])];
  if (b !== null && typeof b === 'object') return Object.fromEntries(Object.entries(b).map(([k, v]) => [k, picture(v)]));
  return b;
}

describe('CollateStream (NOTE [Collating as samples come])', () => {
  test('the same batches as defaultCollate: tensors, TypedArrays, numbers, strings, arrays, Maps, objects', () => {
    const sample = (i: number) => ({
      img: mp.full([2, 3], i),
      view: mp
        .tensor([
          [i, 1, 2],
          [3, 4, 5],
        ])
        .transpose(0, 1),
      ta: new Int16Array([i, -i]),
      n: i,
      f: i + 0.5,
      b: i % 2 === 0,
      s: `s${i}`,
      big: BigInt(i),
      pair: [mp.full([1], -i), i],
      m: new Map<string, unknown>([
        ['k', mp.full([2], i, { dtype: 'int32' })],
        ['j', i],
      ]),
    });
    for (const n of [1, 2, 5]) {
      const samples = Array.from({ length: n }, (_, i) => sample(i));
      const a = streamed(samples),
        b = mp.defaultCollate(samples);
      assert.deepEqual(picture(a), picture(b));
      assert.ok((a as { img: mp.Tensor }).img.isShared());
      mp.releaseTensors(a);
      mp.releaseTensors(b);
    }
    fc.assert(
      fc.property(fc.array(fc.tuple(fc.integer(), fc.double({ noNaN: true })), { minLength: 1, maxLength: 8 }), (rows) => {
        const samples = rows.map(([i, x]) => [mp.full([2], x), i, { x }]);
        const a = streamed(samples),
          b = mp.defaultCollate(samples);
        assert.deepEqual(picture(a), picture(b));
        mp.releaseTensors([a, b]);
      }),
      { numRuns: 50 },
    );
  });

  test("a sample that does not match gives defaultCollate's own CollateError, word for word", () => {
    const cases: unknown[][] = [
      [mp.zeros([2]), mp.zeros([3])],
      [mp.zeros([2]), mp.zeros([2], { dtype: 'int32' })],
      [mp.zeros([2]), 3],
      [new Float32Array(2), new Float64Array(2)],
      [{ a: mp.zeros([1]), b: 2 }, { a: mp.zeros([1]) }],
      [[mp.zeros([1]), 1], [mp.zeros([1])]],
      [new Map([['k', mp.zeros([1])]]), new Map([['j', mp.zeros([1])]])],
      [
        { t: mp.zeros([1]), d: new Date() },
        { t: mp.zeros([1]), d: new Date() },
      ],
      [
        { t: mp.zeros([1]), x: 1 },
        { t: mp.zeros([1]), x: 'one' },
      ],
    ];
    for (const samples of cases) {
      const want = (() => {
        try {
          mp.defaultCollate(samples);
        } catch (e) {
          return e as mp.CollateError;
        }
        return null;
      })();
      assert.ok(want instanceof mp.CollateError);
      const e = throwsCoded(() => streamed(samples), mp.CollateError, 'ERR_TP_COLLATE');
      assert.equal(e.message, want.message);
      assert.equal(e.path, want.path);
    }
  });

  test('a loader copies each sample as getItem returns it: a dataset that refills one buffer still gets every sample', async () => {
    // How this test sees the early copy; defaultCollate after the last getItem would stack
    // the last sample n times. An async getItem takes the ordinary path, and its own fresh samples are right too.
    const buf = mp.empty([4]);
    const reusing = { length: 6, getItem: (i: number) => buf.fill(i) };
    const loader = new mp.DataLoader(reusing, { batchSize: 3 });
    const got: unknown[] = [];
    for await (const b of loader) {
      got.push((b as mp.Tensor).toArray());
      mp.releaseTensors(b);
    }
    assert.deepEqual(
      got,
      [
        [0, 1, 2],
        [3, 4, 5],
      ].map((r) => r.map((i) => [i, i, i, i])),
    );
    const mixed = { length: 4, getItem: (i: number) => (i === 1 ? Promise.resolve(mp.full([1], i)) : mp.full([1], i)) };
    const batches: unknown[] = [];
    for await (const b of new mp.DataLoader(mixed, { batchSize: 4 })) {
      batches.push((b as mp.Tensor).toArray());
      mp.releaseTensors(b);
    }
    assert.deepEqual(batches, [[[0], [1], [2], [3]]]);
  });
});
