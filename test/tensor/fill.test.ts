// NOTE [Streaming fill]: fills at or above the threshold go through the addon's streaming
// stores. The threshold is forced to 0 here, so every fill of this file streams: every dtype,
// runs that start and end off a 16-byte boundary, views, and the empty run.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as mp from '../../src/index.js';
import { DTYPES } from '../../src/tensor/dtype.js';
import { fillStats } from '../../src/tensor/fill.js';
import { checkLeaks } from '../helpers/leaks.js';

process.env.TENSORPROC_STREAM_FILL_BYTES = '0'; // read at the first fill of the process

checkLeaks();

const value = (dtype: mp.DType): mp.Scalar =>
  dtype === 'int64' || dtype === 'uint64' ? 7n : dtype === 'bool' ? true : dtype.startsWith('float') || dtype === 'bfloat16' ? 1.5 : 5;

for (const dtype of DTYPES) {
  test(`${dtype}: a streamed fill writes exactly its elements`, () => {
    for (const [n, from, to] of [
      [100_003, 0, 100_003],
      [100_003, 3, 99_990],
      [17, 1, 16],
      [1, 0, 1],
      [5, 2, 2],
    ] as const) {
      const base = mp.zeros([n], { dtype, shared: n > 1000 });
      const streamed = fillStats.streamed;
      base.narrow(0, from, to - from).fill(value(dtype));
      assert.equal(fillStats.streamed, streamed + (to > from ? 1 : 0), 'the streaming path was taken');
      // The expected element through set(), which never streams: the raw words must match.
      const one = mp.zeros([1], { dtype });
      one.set([0], value(dtype));
      const want = one.data[0];
      const zero = mp.zeros([1], { dtype }).data[0];
      const got = base.data as ArrayLike<unknown>;
      for (let i = 0; i < n; i++) {
        if (got[i] !== (i >= from && i < to ? want : zero))
          assert.fail(`${dtype} [${n}] fill of ${from}..${to}: element ${i} is ${String(got[i])}`);
      }
      base.release();
    }
  });
}

test('a non-contiguous view is filled element by element, and only its elements', () => {
  const m = mp.zeros([64, 64]);
  m.select(1, 3).fill(2);
  const rows = m.toArray() as number[][];
  assert.ok(rows.every((r) => r.every((x, j) => x === (j === 3 ? 2 : 0))));
});

test('a tensor wrapping a SharedArrayBuffer is streamed into as well', () => {
  const t = mp.tensor(new Float32Array(new SharedArrayBuffer(4 * 1001)));
  const streamed = fillStats.streamed;
  t.narrow(0, 1, 999).fill(3);
  assert.equal(fillStats.streamed, streamed + 1);
  const d = t.data as Float32Array;
  assert.deepEqual([d[0], d[1], d[999], d[1000]], [0, 3, 3, 0]);
});
