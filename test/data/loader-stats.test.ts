// loader.stats() (API.md, "Observability"): shapes and counts, with and without workers, with
// failures and restarts. Timings are only checked to be finite numbers >= 0, in order.
import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as mp from '../../src/index.js';
import { checkLeaks } from '../helpers/leaks.js';

checkLeaks();

const fixtures = new URL('./fixtures/datasets.js', import.meta.url);
const target = (name: string, ...args: unknown[]) => ({ module: fixtures, export: name, args });

function timings(p: mp.Percentiles, count: number): void {
  assert.equal(p.count, count);
  for (const v of [p.p50, p.p90, p.p99]) assert.ok(Number.isFinite(v) && v >= 0, `${v} is a finite time >= 0`);
  assert.ok(p.p50 <= p.p90 && p.p90 <= p.p99);
}

async function drain(loader: mp.DataLoader, each: (k: number) => void = () => {}): Promise<number> {
  let k = 0;
  for await (const b of loader) {
    mp.releaseTensors(b);
    each(k++);
  }
  return k;
}

describe('loader.stats()', () => {
  test('numWorkers 0: counts, percentiles over the last 1,000 batches, no workers', async () => {
    const loader = new mp.DataLoader(
      Array.from({ length: 1200 }, (_, i) => i),
      { batchSize: 1 },
    );
    const before = loader.stats();
    assert.deepEqual(before, {
      done: 0,
      failed: 0,
      queued: 0,
      restarts: 0,
      runTime: { p50: 0, p90: 0, p99: 0, count: 0 },
      waitTime: { p50: 0, p90: 0, p99: 0, count: 0 },
      workers: [],
    });
    await drain(loader, (k) => {
      if (k === 9) {
        const s = loader.stats();
        assert.equal(s.done, 10);
        timings(s.runTime, 10);
        timings(s.waitTime, 10);
      }
    });
    const s = loader.stats();
    assert.equal(s.done, 1200);
    assert.equal(s.queued, 0);
    timings(s.runTime, 1000);
    timings(s.waitTime, 1000);
    assert.notEqual(loader.stats(), loader.stats(), 'a new object each call');
  });

  test('numWorkers 2: batches per worker, busy shares, queued bounded while running and 0 after', async () => {
    const loader = new mp.DataLoader(target('squares', 10), { batchSize: 2, numWorkers: 2, prefetchFactor: 2 });
    let during: mp.DataLoaderStats | undefined;
    await drain(loader, (k) => {
      if (k === 0) during = loader.stats();
    });
    assert.equal(during!.done, 1);
    assert.ok(Number.isInteger(during!.queued) && during!.queued >= 0 && during!.queued <= 4, `queued ${during!.queued}`);
    assert.deepEqual(
      during!.workers.map((w) => w.id),
      [0, 1],
    );
    assert.ok(during!.workers.every((w) => typeof w.pid === 'number'));
    const s = loader.stats();
    assert.equal(s.done, 5);
    assert.equal(s.failed, 0);
    assert.equal(s.queued, 0);
    timings(s.runTime, 5);
    timings(s.waitTime, 5);
    assert.deepEqual(
      s.workers.map((w) => [w.id, w.done, w.pid]),
      [
        [0, 3, null],
        [1, 2, null],
      ],
      'in order, round robin; no pid once the workers are gone',
    );
    for (const w of s.workers) assert.ok(w.busy >= 0 && w.busy <= 1);
  });

  for (const numWorkers of [0, 2]) {
    test(`numWorkers ${numWorkers}: a batch that threw counts as failed`, async () => {
      const loader = new mp.DataLoader(target('throwing', 8, 5), { batchSize: 2, numWorkers });
      await assert.rejects(drain(loader));
      const s = loader.stats();
      assert.equal(s.done, 2);
      assert.equal(s.failed, 1);
      assert.equal(s.queued, 0);
    });
  }

  test('a replaced worker counts as a restart', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tp-stats-'));
    const onWarning = () => {};
    process.on('warning', onWarning);
    try {
      const loader = new mp.DataLoader(target('killer', 12, 5, { signal: 'SIGKILL', marker: join(dir, 'killed') }), {
        batchSize: 2,
        numWorkers: 2,
        maxWorkerRestarts: 1,
      });
      assert.equal(await drain(loader), 6);
      const s = loader.stats();
      assert.equal(s.restarts, 1);
      assert.equal(s.done, 6);
      assert.equal(s.failed, 0);
    } finally {
      process.off('warning', onWarning);
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
