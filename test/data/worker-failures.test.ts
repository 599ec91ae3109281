// How an iteration with workers fails: a batch that throws (worker, indices, the child's
// stack), a dataset target or workerInit that throws, a worker killed by a signal or exiting,
// no batch within the timeout, a full shared memory; never a hang, no worker left running.
// With maxWorkerRestarts a dead worker of a map-style dataset is replaced and the epoch ends.
import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as mp from '../../src/index.js';
import { isCoded } from '../helpers/errors.js';
import { checkLeaks } from '../helpers/leaks.js';
import { running } from '../helpers/procs.js';
import { waitFor } from '../helpers/wait.js';

checkLeaks();

const fixtures = new URL('./fixtures/datasets.js', import.meta.url);
const target = (name: string, ...args: unknown[]) => ({ module: fixtures, export: name, args });

/** Iterates to the end (releasing); returns the workers' pids (once both had started), the batches and what it threw. */
async function drain(loader: mp.DataLoader, workers = 2): Promise<{ pids: number[]; error: unknown; got: number }> {
  let got = 0;
  const done = (async () => {
    for await (const b of loader) {
      got++;
      mp.releaseTensors(b);
    }
  })().then(
    () => null,
    (e: unknown) => e,
  );
  let pids: number[] = [];
  await Promise.race([done, waitFor(() => (pids = loader.workerPids).length === workers, 20_000)]);
  const error = await done;
  return { pids, error, got };
}

function noneRunning(pids: number[]): void {
  assert.ok(pids.length > 0);
  for (const p of pids) assert.ok(!running(p), `worker ${p} still running`);
}

describe('DataLoader worker failures', () => {
  test("a batch that throws: DataLoaderWorkerError with the worker, the indices and the child's stack; the workers are stopped", async () => {
    const loader = new mp.DataLoader(target('throwing', 12, 5), { batchSize: 2, numWorkers: 2 });
    const { pids, error, got } = await drain(loader);
    assert.equal(got, 2, 'the batches before it were handed out');
    isCoded(mp.DataLoaderWorkerError, 'ERR_TP_WORKER_RAISED')(error);
    const e = error as mp.DataLoaderWorkerError;
    assert.equal(e.workerId, 0); // batch 2 of a round robin over 2 workers
    assert.deepEqual(e.indices, [4, 5]);
    assert.ok(pids.includes(e.pid));
    assert.match(e.message, /Caught RangeError in DataLoader worker 0 \(pid \d+\) while loading the samples of indices \[4, 5\]/);
    assert.match(e.message, /bad sample 5/);
    assert.match(e.message, /fixtures\/datasets\.js/, "the child's stack");
    assert.equal((e.cause as Error).name, 'RangeError');
    noneRunning(pids);
  });

  test('a dataset target or workerInit that throws in the worker: DataLoaderWorkerError with indices null', async () => {
    // Built in the main process first: a target that fails there fails ready(), before any worker.
    await assert.rejects(new mp.DataLoader(target('failsToBuild'), { numWorkers: 1 }).ready(), /cannot open the dataset/);
    const loader = new mp.DataLoader(target('squares', 4), { numWorkers: 2, workerInit: { module: fixtures, export: 'failsToBuild' } });
    const { error } = await drain(loader);
    isCoded(mp.DataLoaderWorkerError, 'ERR_TP_WORKER_RAISED')(error);
    const e = error as mp.DataLoaderWorkerError;
    assert.equal(e.indices, null);
    assert.match(e.message, /while building its dataset or running workerInit[\s\S]*cannot open the dataset/);
  });

  for (const signal of ['SIGKILL', 'SIGTERM'] as const) {
    test(`a worker killed by ${signal}: DataLoaderWorkerExitedError naming the worker and the signal, never a hang`, async () => {
      const loader = new mp.DataLoader(target('killer', 20, 6, { signal }), { batchSize: 2, numWorkers: 2 });
      const { pids, error } = await drain(loader);
      isCoded(mp.DataLoaderWorkerExitedError, 'ERR_TP_WORKER_EXITED')(error);
      const e = error as mp.DataLoaderWorkerExitedError;
      assert.equal(e.workerId, 1); // indices [6, 7]: the fourth batch, worker 1's
      assert.equal(e.signalName, signal);
      assert.equal(e.exitCode, null);
      assert.match(
        e.message,
        new RegExp(`DataLoader worker 1 \\(pid ${e.pid}\\) was killed by signal ${signal} while loading the samples of indices \\[6, 7`),
      );
      if (signal === 'SIGKILL') assert.match(e.message, /out-of-memory killer/);
      noneRunning(pids);
    });
  }

  test('a worker out of memory (its heap exhausted): DataLoaderWorkerExitedError naming the worker, the signal and the fix', async () => {
    // The workers inherit NODE_OPTIONS when they start: a 24 MiB heap, which sample 3 overflows.
    const saved = process.env.NODE_OPTIONS;
    process.env.NODE_OPTIONS = `${saved ?? ''} --max-old-space-size=24`;
    try {
      const loader = new mp.DataLoader(target('hoarding', 8, 3), { batchSize: 1, numWorkers: 2 });
      const { pids, error, got } = await drain(loader);
      isCoded(mp.DataLoaderWorkerExitedError, 'ERR_TP_WORKER_EXITED')(error);
      const e = error as mp.DataLoaderWorkerExitedError;
      assert.equal(e.workerId, 1); // index 3: worker 1's second batch (it may hold 5 too)
      assert.equal(e.signalName, 'SIGABRT', 'V8 aborts a process whose heap is full');
      assert.match(
        e.message,
        /worker 1 \(pid \d+\) was killed by signal SIGABRT while loading the samples of indices \[(\d+, )*3(, \d+)*\]/,
      );
      assert.match(e.message, /heap out of memory[\s\S]*--max-old-space-size/);
      assert.ok(got <= 3, 'no batch after the one that failed');
      noneRunning(pids);
    } finally {
      if (saved === undefined) delete process.env.NODE_OPTIONS;
      else process.env.NODE_OPTIONS = saved;
    }
  });

  test('a persistent worker that dies while parked between epochs is replaced when the next epoch starts', async () => {
    const loader = new mp.DataLoader(target('squares', 8), { batchSize: 2, numWorkers: 2, persistentWorkers: true });
    const epoch = async () => {
      const ys: number[] = [];
      for await (const b of loader) {
        ys.push(...((b as { y: mp.Tensor }).y.toArray() as number[]));
        mp.releaseTensors(b);
      }
      return ys;
    };
    const all = Array.from({ length: 8 }, (_, i) => i);
    assert.deepEqual(await epoch(), all);
    const [dead, kept] = loader.workerPids as [number, number];
    process.kill(dead, 'SIGKILL');
    await waitFor(() => !running(dead));
    assert.deepEqual(await epoch(), all, 'the next epoch is whole');
    const now = loader.workerPids;
    assert.equal(now.length, 2);
    assert.ok(!now.includes(dead) && now.includes(kept), `${now} after killing ${dead}`);
    await loader.close();
  });

  test('a worker that exits with a code: DataLoaderWorkerExitedError with the code', async () => {
    const loader = new mp.DataLoader(target('killer', 20, 3, { exitCode: 3 }), { batchSize: 1, numWorkers: 2, persistentWorkers: true });
    const { pids, error } = await drain(loader);
    isCoded(mp.DataLoaderWorkerExitedError, 'ERR_TP_WORKER_EXITED')(error);
    assert.equal((error as mp.DataLoaderWorkerExitedError).exitCode, 3);
    assert.match((error as Error).message, /exited unexpectedly with code 3/);
    noneRunning(pids);
    await loader.close();
  });

  test('maxWorkerRestarts: a killed worker of a map-style dataset is replaced, its batches loaded again, the epoch complete', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tp-restart-'));
    const warnings: string[] = [];
    const onWarning = (w: Error) => warnings.push(w.message);
    process.on('warning', onWarning);
    try {
      const marker = join(dir, 'killed');
      const loader = new mp.DataLoader(target('killer', 20, 9, { signal: 'SIGKILL', marker }), {
        batchSize: 2,
        numWorkers: 2,
        maxWorkerRestarts: 1,
      });
      const got: number[] = [];
      for await (const b of loader) {
        got.push(...((b as mp.Tensor).toArray() as number[]));
        mp.releaseTensors(b);
      }
      assert.deepEqual(
        got,
        Array.from({ length: 20 }, (_, i) => i),
        'every batch, in order',
      );
      const killedPid = Number(readFileSync(marker, 'utf8'));
      assert.ok(!running(killedPid));
      await new Promise((r) => setImmediate(r));
      assert.ok(
        warnings.some((w) => /worker 0 \(pid \d+\) was killed by signal SIGKILL.*replaced/.test(w)),
        warnings.join('\n'),
      );
      // Twice in one epoch with one restart allowed: the second death fails it.
      rmSync(marker);
      const twice = new mp.DataLoader(target('killer', 20, 9, { signal: 'SIGKILL' }), {
        batchSize: 2,
        numWorkers: 2,
        maxWorkerRestarts: 1,
      });
      isCoded(mp.DataLoaderWorkerExitedError, 'ERR_TP_WORKER_EXITED')((await drain(twice)).error);
    } finally {
      process.off('warning', onWarning);
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('timeout: no batch within it is DataLoaderTimeoutError (in order, a stuck sample holds back the rest); the workers are stopped', async () => {
    const gate = new mp.Event();
    try {
      const loader = new mp.DataLoader(target('gated', 8, [0], gate), { batchSize: 1, numWorkers: 2, timeout: 300 });
      const { pids, error, got } = await drain(loader);
      assert.equal(got, 0);
      isCoded(mp.DataLoaderTimeoutError, 'ERR_TP_DATALOADER_TIMEOUT')(error);
      assert.match((error as Error).message, /timed out after 300 ms/);
      noneRunning(pids);
    } finally {
      gate.close();
    }
  });

  test('a full shared memory: the coded ShmFullError, with what the loader can change about it', async () => {
    const loader = new mp.DataLoader(target('huge', 4), { batchSize: 2, numWorkers: 1 });
    const { error } = await drain(loader, 1);
    isCoded(mp.ShmFullError, 'ERR_TP_SHM_FULL')(error);
    assert.match((error as Error).message, /DataLoader worker 0 \(pid \d+\): Cannot allocate a shared segment[\s\S]*prefetchFactor/);
  });

  test("an iterable dataset's dead worker cannot be replaced (its stream cannot be replayed): the epoch fails", async () => {
    const loader = new mp.DataLoader(target('stream', 40), { batchSize: 2, numWorkers: 2, maxWorkerRestarts: 3, timeout: 10_000 });
    const it = loader[Symbol.asyncIterator]();
    mp.releaseTensors((await it.next()).value);
    process.kill(loader.workerPids[1]!, 'SIGKILL');
    let error: unknown = null;
    try {
      for (;;) {
        const r = await it.next();
        if (r.done) break;
        mp.releaseTensors(r.value);
      }
    } catch (e) {
      error = e;
    }
    isCoded(mp.DataLoaderWorkerExitedError, 'ERR_TP_WORKER_EXITED')(error);
    assert.equal((error as mp.DataLoaderWorkerExitedError).signalName, 'SIGKILL');
  });
});
