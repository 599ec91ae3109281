// Without a usable driver: the package loads and every CPU path is unchanged, and every CUDA
// call is CudaUnavailableError (ERR_TP_CUDA_UNAVAILABLE) naming the reason: no driver here (a
// library path that does not exist, whatever the machine has), no device and a driver too old
// in children (the stand-in with FAKECUDA_DEVICES=0, and built without cuMemCreate).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { buildFake } from './driver.js';
import * as mp from '../../src/index.js';
import { checkLeaks } from '../helpers/leaks.js';

process.env.TENSORPROC_CUDA_LIBRARY = '/nonexistent/libcuda.so.1';
checkLeaks();

const unavailable = { name: 'CudaUnavailableError', code: 'ERR_TP_CUDA_UNAVAILABLE', message: /no NVIDIA driver \(dlopen: / };

test('no driver: every CUDA call is ERR_TP_CUDA_UNAVAILABLE naming the reason; CPU unchanged', async () => {
  assert.equal(mp.cuda.isAvailable(), false);
  assert.equal(mp.cuda.deviceCount(), 0);
  assert.match(mp.cuda.unavailableReason()!, /^no NVIDIA driver \(dlopen: \/nonexistent\/libcuda\.so\.1: /);
  assert.deepEqual(mp.cuda.status().devices, []);
  const cpu = mp.full([4], 1);
  assert.equal(cpu.device, 'cpu');
  assert.equal(mp.zeros([2], { shared: true }).device, 'cpu');
  assert.equal(cpu.isPinned(), false);
  for (const f of [
    () => mp.empty([2], { device: 'cuda' }),
    () => mp.zeros([2], { device: 'cuda:0' }),
    () => mp.full([2], 1, { device: 'cuda:1' }),
    () => cpu.pinMemory(),
    () => mp.cuda.memGetInfo(),
  ]) {
    assert.throws(f, unavailable);
  }
  for (const p of [cpu.to('cuda'), cpu.cuda(), cpu.cuda(1), mp.cuda.synchronize()]) await assert.rejects(p, unavailable);
  assert.equal(cpu.isShared(), false, 'a refused pinMemory() moved nothing');
  assert.equal(await cpu.to('cpu'), cpu);
  assert.deepEqual((await cpu.cpu()).toArray(), [1, 1, 1, 1]);
  mp.cuda.emptyCache(); // nothing to give back: not an error
  // A bad device name is the caller's error, driver or not.
  assert.throws(() => mp.empty([1], { device: 'gpu' as never }), { name: 'InvalidArgumentError', code: 'ERR_TP_INVALID_ARGUMENT' });
  await assert.rejects(cpu.cuda(-1), { code: 'ERR_TP_INVALID_ARGUMENT' });
});

test('no driver: DataLoader pinMemory warns once and yields the same batches', async () => {
  const warnings: string[] = [];
  const onWarning = (w: Error & { code?: string }) => warnings.push(String(w.code));
  process.on('warning', onWarning);
  const ds = { length: 6, getItem: (i: number) => mp.full([2], i) };
  const seen: unknown[] = [];
  for (let epoch = 0; epoch < 2; epoch++) {
    for await (const b of new mp.DataLoader(ds, { batchSize: 3, pinMemory: true })) {
      seen.push((b as mp.Tensor).toArray());
      assert.equal((b as mp.Tensor).isPinned(), false);
      (b as mp.Tensor).release();
    }
  }
  await new Promise((r) => setImmediate(r));
  process.off('warning', onWarning);
  assert.deepEqual(warnings, ['TP_PIN_MEMORY_OFF']);
  assert.deepEqual(seen.slice(0, 2), [
    [
      [0, 0],
      [1, 1],
      [2, 2],
    ],
    [
      [3, 3],
      [4, 4],
      [5, 5],
    ],
  ]);
  assert.throws(() => new mp.DataLoader(ds, { pinMemory: 'yes' as never }), { code: 'ERR_TP_INVALID_ARGUMENT' });
});

test('a driver with no device, and one too old, each named; doctor reports the reason', () => {
  const index = fileURLToPath(new URL('../../src/index.js', import.meta.url));
  const probe = `import(${JSON.stringify(index)}).then((mp) => { let code; try { mp.empty([1], { device: 'cuda' }); } catch (e) { code = e.code; } console.log(JSON.stringify([mp.cuda.unavailableReason(), code])); })`;
  const run = (env: Record<string, string>) =>
    JSON.parse(spawnSync(process.execPath, ['-e', probe], { env: { ...process.env, ...env }, encoding: 'utf8' }).stdout);
  assert.deepEqual(run({ TENSORPROC_CUDA_LIBRARY: buildFake(), FAKECUDA_DEVICES: '0' }), [
    'no CUDA device (cuInit: CUDA_ERROR_NO_DEVICE)',
    'ERR_TP_CUDA_UNAVAILABLE',
  ]);
  const old = buildFake('old');
  assert.deepEqual(run({ TENSORPROC_CUDA_LIBRARY: old }), [`driver too old (${old} has no cuMemCreate)`, 'ERR_TP_CUDA_UNAVAILABLE']);
  const cli = fileURLToPath(new URL('../../src/cli/main.js', import.meta.url));
  const doc = spawnSync(process.execPath, [cli, 'doctor'], { encoding: 'utf8' }).stdout;
  assert.match(doc, /^ok {4}cuda driver {16}unavailable: no NVIDIA driver \(dlopen: \/nonexistent\/libcuda\.so\.1: /m);
  const fake = spawnSync(process.execPath, [cli, 'doctor'], {
    encoding: 'utf8',
    env: { ...process.env, TENSORPROC_CUDA_LIBRARY: buildFake() },
  }).stdout;
  assert.match(fake, /^ok {4}cuda sharing {15}cuda:0: export, import, fill, copy back and pinning a shared segment work$/m);
});
