// ndarray (scijs) and @stdlib/ndarray over a tensor's memory: each wraps a typed array with
// the tensor's shape, strides and offset and copies nothing, so a write through either side
// is seen by the other, a strided view (a transpose) reads the same elements, and a write by
// another process into the shared tensor is seen through the wrapper. A contiguous tensor
// gives t.data (its elements, from its offset); any view, strided too, gives its storage's
// elements (t.storage.buffer) with its own offset.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import ndarray from 'ndarray';
import { createRequire } from 'node:module';
import type StdlibCtor from '@stdlib/ndarray/ctor';
import * as mp from '../../src/index.js';
import { checkLeaks } from '../helpers/leaks.js';

checkLeaks();
// @stdlib/ndarray's constructor, new ndarray(dtype, buffer, shape, strides, offset, order): a
// CommonJS directory module, which ESM cannot import by its name.
const StdlibNdarray = createRequire(import.meta.url)('@stdlib/ndarray/ctor') as typeof StdlibCtor;
const writer = new URL('./fixtures/writer.js', import.meta.url);

/** The storage of `t` as float32/float64 elements: what a strided view of it indexes into. */
const f32 = (t: mp.Tensor) => new Float32Array(t.storage.buffer, t.storage.byteOffset, t.storage.nbytes / 4);
const f64 = (t: mp.Tensor) => new Float64Array(t.storage.buffer, t.storage.byteOffset, t.storage.nbytes / 8);
const iota = (t: mp.Tensor): void => (t.data as Float32Array | Float64Array).forEach((_, i, d) => (d[i] = i));

test('ndarray takes a tensor without a copy: writes cross both ways, views keep their strides, another process writes through', async () => {
  const t = mp.empty([3, 4], { shared: true });
  iota(t);
  try {
    const a = ndarray(t.data as Float32Array, [...t.shape]);
    assert.equal(a.data, t.data, 'the same typed array, not a copy');
    a.set(2, 3, 7);
    assert.equal(t.get(2, 3), 7);
    t.set([0, 1], 5);
    assert.equal(a.get(0, 1), 5);

    const v = t.transpose(0, 1).narrow(0, 1, 2); // shape [2, 3], strides [1, 4], offset 1
    const av = ndarray(f32(v), [...v.shape], [...v.stride], v.offset);
    assert.equal(av.data.buffer, t.storage.buffer);
    for (let i = 0; i < 2; i++) for (let j = 0; j < 3; j++) assert.equal(av.get(i, j), v.get(i, j), `[${i}, ${j}]`);
    av.set(1, 0, 9);
    assert.equal(t.get(0, 2), 9, 'a write through the strided view lands in the tensor');

    await mp.spawn({ module: writer }, { args: [t], nprocs: 1 });
    assert.equal(a.get(1, 2), 42, "the child's write, seen through ndarray");
  } finally {
    t.release();
  }
});

test('@stdlib/ndarray takes a tensor without a copy: writes cross both ways, another process writes through', async () => {
  const t = mp.empty([3, 4], { dtype: 'float64', shared: true });
  iota(t);
  try {
    const a = new StdlibNdarray('float64', t.data as Float64Array, [...t.shape], [...t.stride], 0, 'row-major');
    assert.equal(a.data, t.data, 'the same typed array, not a copy');
    a.set(2, 3, 7);
    assert.equal(t.get(2, 3), 7);
    t.set([0, 1], 5);
    assert.equal(a.get(0, 1), 5);

    const v = t.transpose(0, 1);
    const av = new StdlibNdarray('float64', f64(v), [...v.shape], [...v.stride], v.offset, 'column-major');
    for (let i = 0; i < 4; i++) for (let j = 0; j < 3; j++) assert.equal(av.get(i, j), v.get(i, j), `[${i}, ${j}]`);
    av.set(3, 0, 11);
    assert.equal(t.get(0, 3), 11, 'a write through the transposed view lands in the tensor');

    await mp.spawn({ module: writer }, { args: [t], nprocs: 1 });
    assert.equal(a.get(1, 2), 42, "the child's write, seen through @stdlib/ndarray");
  } finally {
    t.release();
  }
});
