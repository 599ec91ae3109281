// The rings and busy clocks under loader.stats() and pool.stats() (NOTE [Stats rings]):
// the last 1,000 samples kept, percentiles by nearest rank, shares within [0, 1].
import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import { BusyClock, RING_SIZE, SampleRing } from '../../src/workers/stats-ring.js';

describe('SampleRing', () => {
  test('empty: zeros with count 0', () => {
    assert.deepEqual(new SampleRing().percentiles(), { p50: 0, p90: 0, p99: 0, count: 0 });
  });

  test('percentiles by nearest rank, whatever order the samples came in', () => {
    const r = new SampleRing();
    const values = Array.from({ length: 100 }, (_, i) => 100 - i); // 100 … 1
    for (const v of values) r.push(v);
    assert.deepEqual(r.percentiles(), { p50: 50, p90: 90, p99: 99, count: 100 });
    assert.deepEqual(r.percentiles(), { p50: 50, p90: 90, p99: 99, count: 100 }, 'reading twice changes nothing');
  });

  test('keeps the last RING_SIZE samples: older ones are overwritten', () => {
    const r = new SampleRing();
    for (let v = 1; v <= 1500; v++) r.push(v);
    assert.equal(RING_SIZE, 1000);
    assert.equal(r.count, 1000);
    assert.deepEqual(r.percentiles(), { p50: 1000, p90: 1400, p99: 1490, count: 1000 }); // 501 … 1500
  });
});

describe('BusyClock', () => {
  test('shares are within [0, 1]; an unknown worker is 0; stop freezes the wall time', () => {
    const c = new BusyClock(2);
    c.add(0, 1e9); // more than the wall time: clamped
    c.add(5, 1); // no such worker: ignored
    c.stop();
    assert.equal(c.share(0), 1);
    assert.equal(c.share(1), 0);
    assert.equal(c.share(7), 0);
  });
});
