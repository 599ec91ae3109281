// onnxruntime-node over a tensor's memory: an ort.Tensor made on t.data reads the tensor's
// shared memory when the session runs (not a copy taken when it was made), and an output
// given in `fetches` is written by the session into another shared tensor's memory (the
// result it returns beside is a copy of its own).
// onnxruntime-node before Node 24.9 refuses typed arrays over a SharedArrayBuffer
// (napi_get_arraybuffer_info, DESIGN.md); a tensor's data is an external plain ArrayBuffer
// over the same mapping, which it takes.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as mp from '../../src/index.js';
import { checkLeaks } from '../helpers/leaks.js';
import { squareModel } from './fixtures/onnx-model.js';

// onnxruntime-node 1.30 on Linux, as it loads, opens a telemetry database for the process's
// life (~/.cache/Microsoft/DeveloperTools/.onnxruntime/onnxruntime.db and its -wal and -shm
// files: three descriptors the leak check would count), leaves an empty /tmp/mat-debug-PID.log
// and tries to upload. ORT_DISABLE_TELEMETRY=1, read by its native library when it loads,
// turns all of that off; it must be set before the import, which is why this one is dynamic
// (a static import runs before any statement of the module).
process.env.ORT_DISABLE_TELEMETRY = '1';
const ort = await import('onnxruntime-node');
type OrtTensor = InstanceType<typeof ort.Tensor>;

checkLeaks();
const writer = new URL('./fixtures/writer.js', import.meta.url);

test('onnxruntime-node runs on a shared tensor without copying it, and writes its output into another shared tensor', async () => {
  const session = await ort.InferenceSession.create(squareModel(2));
  const x = mp.empty([3, 4], { shared: true });
  const y = mp.zeros([3, 4], { shared: true });
  try {
    const xs = x.data as Float32Array;
    xs.forEach((_, i) => (xs[i] = i));
    assert.ok(xs.buffer instanceof ArrayBuffer, "a tensor's data is a plain (external) ArrayBuffer, which onnxruntime takes");
    const input = new ort.Tensor('float32', xs, [...x.shape]);
    const output = new ort.Tensor('float32', y.data as Float32Array, [...y.shape]);
    assert.equal(input.data, xs, 'the same typed array');

    const r = await session.run({ x: input }, { y: output });
    for (let i = 0; i < 12; i++) assert.equal(y.get(Math.floor(i / 4), i % 4), i * i, `y[${i}] written into the shared tensor`);
    assert.deepEqual([...((r.y as OrtTensor).data as Float32Array)], [...(y.data as Float32Array)]);

    // Another process writes into x: the next run reads it through the same ort.Tensor.
    await mp.spawn({ module: writer }, { args: [x], nprocs: 1 });
    await session.run({ x: input }, { y: output });
    assert.equal(y.get(1, 2), 42 * 42);
  } finally {
    await session.release();
    x.release();
    y.release();
  }
});

const [major, minor] = process.versions.node.split('.').map(Number) as [number, number];
test('before Node 24.9 onnxruntime-node refuses a SharedArrayBuffer, which is why tensors are not over one', {
  skip: major > 24 || (major === 24 && minor >= 9) ? 'this Node gives SharedArrayBuffers to Node-API' : false,
}, async () => {
  const session = await ort.InferenceSession.create(squareModel(1));
  try {
    const sab = new Float32Array(new SharedArrayBuffer(16));
    await assert.rejects(session.run({ x: new ort.Tensor('float32', sab, [4]) }));
  } finally {
    await session.release();
  }
});
