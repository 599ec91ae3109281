// mp.memoryStats(): the counts move as segments are made, leased, released, cached, received,
// parked and given up, under both strategies.
import { test, afterEach } from 'node:test';
import assert from 'node:assert/strict';
import * as mp from '../../src/index.js';
import { checkLeaks } from '../helpers/leaks.js';

checkLeaks();
afterEach(() => mp.setSharingStrategy('file_descriptor'));

const targets = new URL('./fixtures/stats-targets.js', import.meta.url);
const MIB = 1 << 20;

for (const strategy of ['file_descriptor', 'file_system'] as const) {
  const fds = strategy === 'file_descriptor' ? 1 : 0;

  test(`${strategy}: made, held, cached and given up`, () => {
    mp.setSharingStrategy(strategy);
    mp.emptyCache();
    const s0 = mp.memoryStats();
    assert.equal(s0.cached.segments, 0);
    const t = mp.empty([MIB / 4], { shared: true }); // 1 MiB: a segment of its own, not a packed piece
    const s1 = mp.memoryStats();
    assert.equal(s1.made.segments, s0.made.segments + 1);
    assert.equal(s1.made.total, s0.made.total + 1);
    assert.ok(s1.made.bytes - s0.made.bytes >= MIB);
    assert.equal(s1.held.segments, s0.held.segments + 1);
    assert.equal(s1.held.bytes - s0.held.bytes, s1.made.bytes - s0.made.bytes);
    assert.equal(s1.mappings, s0.mappings + 1);
    assert.equal(s1.descriptors, s0.descriptors + fds);
    t.release();
    const s2 = mp.memoryStats();
    assert.equal(s2.held.segments, s0.held.segments, 'released: no longer held');
    assert.equal(s2.cached.segments, 1, 'kept for reuse');
    assert.equal(s2.cached.bytes, s1.made.bytes - s0.made.bytes);
    assert.equal(s2.made.segments, s1.made.segments, 'still made and mapped');
    const again = mp.empty([MIB / 4], { shared: true });
    const s3 = mp.memoryStats();
    assert.equal(s3.made.total, s1.made.total, 'reused, not made again');
    assert.equal(s3.cached.segments, 0);
    assert.equal(s3.held.segments, s1.held.segments);
    again.release();
    mp.emptyCache();
    const s4 = mp.memoryStats();
    assert.equal(s4.made.segments, s0.made.segments);
    assert.equal(s4.made.bytes, s0.made.bytes);
    assert.equal(s4.cached.segments, 0);
    assert.equal(s4.descriptors, s0.descriptors);
    assert.equal(s4.mappings, s0.mappings);
  });

  test(`${strategy}: received, held, parked and unmapped`, async () => {
    mp.setSharingStrategy(strategy);
    mp.emptyCache();
    const q = new mp.Queue<mp.Tensor>();
    const leave = new mp.Event();
    const ctx = mp.startProcesses({ module: targets, export: 'sendOne' }, { args: [q, leave, strategy], join: false });
    try {
      const s0 = mp.memoryStats();
      const t = await q.get({ timeout: 60_000 });
      assert.equal(t.get(0), 2);
      const s1 = mp.memoryStats();
      assert.equal(s1.received.segments, s0.received.segments + 1);
      assert.equal(s1.received.total, s0.received.total + 1);
      assert.ok(s1.received.bytes - s0.received.bytes >= MIB);
      assert.equal(s1.held.segments, s0.held.segments + 1);
      assert.equal(s1.made.segments, s0.made.segments, 'not made here');
      assert.equal(s1.mappings, s0.mappings + 1);
      assert.equal(s1.descriptors, s0.descriptors + fds, 'a memfd is kept to pass on');
      t.release();
      const s2 = mp.memoryStats();
      assert.equal(s2.held.segments, s0.held.segments);
      assert.equal(s2.received.parked, s0.received.parked + 1, 'kept mapped for its next arrival');
      assert.equal(s2.received.segments, s1.received.segments);
      mp.emptyCache();
      const s3 = mp.memoryStats();
      assert.equal(s3.received.segments, s0.received.segments);
      assert.equal(s3.received.parked, 0);
      assert.equal(s3.mappings, s0.mappings);
      assert.equal(s3.descriptors, s0.descriptors);
    } finally {
      leave.set();
      await ctx.join();
      q.close();
      leave.close();
    }
  });
}

test('memoryStats() is a plain object of numbers', () => {
  const s = mp.memoryStats();
  assert.deepEqual(Object.keys(s), ['made', 'held', 'cached', 'received', 'descriptors', 'mappings']);
  assert.ok(JSON.stringify(s).length > 0);
  for (const group of [s.made, s.held, s.cached, s.received]) {
    for (const n of Object.values(group)) assert.ok(Number.isSafeInteger(n) && n >= 0);
  }
});
