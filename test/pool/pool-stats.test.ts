// pool.stats() (NOTE [Pool stats]): counts in tasks, restarts, percentiles and busy shares
// of the right shape. Never timing values: only that they are finite, ordered and >= 0.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { checkLeaks } from '../helpers/leaks.js';
import { openPool, stopPoolsAfter, task } from './pools.js';
import { Event as MpEvent, type Percentiles, type PoolStats, type StartMethod } from 'tensorproc';

stopPoolsAfter();
checkLeaks();

const TIMEOUT = { timeout: 120_000 };
const range = (n: number): number[] => Array.from({ length: n }, (_, i) => i);

function checkPercentiles(p: Percentiles, count: number): void {
  assert.equal(p.count, count);
  for (const v of [p.p50, p.p90, p.p99]) assert.ok(Number.isFinite(v) && v >= 0, `percentile ${v}`);
  assert.ok(p.p50 <= p.p90 && p.p90 <= p.p99);
}

function checkWorkers(s: PoolStats, processes: number): void {
  assert.equal(s.workers.length, processes);
  s.workers.forEach((w, id) => {
    assert.equal(w.id, id);
    assert.ok(w.busy >= 0 && w.busy <= 1, `busy ${w.busy}`);
  });
}

for (const startMethod of ['spawn', 'thread'] as StartMethod[]) {
  describe(`pool.stats(), startMethod '${startMethod}'`, () => {
    it('counts tasks done and the chunks they ran in', TIMEOUT, async () => {
      const pool = openPool({ processes: 2, startMethod });
      const fresh = pool.stats();
      assert.deepEqual([fresh.done, fresh.failed, fresh.queued, fresh.inFlight, fresh.restarts], [0, 0, 0, 0, 0]);
      checkPercentiles(fresh.runTime, 0);
      checkWorkers(fresh, 2);

      await pool.map(task('square'), range(100), { chunksize: 10 });
      await pool.map(task('square'), range(5000)); // one chunk of 625 packed numbers each
      const s = pool.stats();
      assert.deepEqual([s.done, s.failed, s.queued, s.inFlight, s.restarts], [5100, 0, 0, 0, 0]);
      checkPercentiles(s.runTime, 10 + 8);
      checkPercentiles(s.waitTime, 10 + 8);
      checkWorkers(s, 2);
      assert.equal(
        s.workers.reduce((n, w) => n + w.done, 0),
        5100,
      );
      assert.deepEqual(s.workers.map((w) => w.pid).sort(), pool.pids().sort());
    });

    it('counts a task that threw as failed', TIMEOUT, async () => {
      const pool = openPool({ processes: 1, startMethod });
      // failAt throws for 3: with one worker, chunks 0-2 are done before it, the rest skipped.
      await assert.rejects(pool.map(task('failAt'), range(6), { chunksize: 1 }));
      const s = pool.stats();
      assert.equal(s.failed, 1);
      assert.ok(s.done >= 3 && s.done <= 5, `done ${s.done}`);
    });

    it('says what waits behind a busy worker, and what it holds', TIMEOUT, async () => {
      const pool = openPool({ processes: 1, startMethod });
      const started = new MpEvent();
      const release = new MpEvent();
      const held = pool.apply(task('block'), [started, release]);
      await started.wait();
      const later = pool.map(task('square'), range(10), { chunksize: 1 });
      const s = pool.stats();
      assert.equal(s.queued + s.inFlight, 11, `queued ${s.queued}, inFlight ${s.inFlight}`);
      assert.ok(s.inFlight >= 1);
      release.set();
      await held;
      await later;
      const after = pool.stats();
      assert.deepEqual([after.done, after.queued, after.inFlight], [11, 0, 0]);
      for (const e of [started, release]) e.close();
    });

    it('counts the workers maxtasksperchild replaces', TIMEOUT, async () => {
      const pool = openPool({ processes: 1, maxtasksperchild: 1, startMethod });
      assert.deepEqual(await pool.map(task('square'), range(4), { chunksize: 1 }), [0, 1, 4, 9]);
      assert.equal(pool.stats().restarts, 4);
      assert.equal(pool.stats().workers[0]!.done, 4);
    });
  });
}
