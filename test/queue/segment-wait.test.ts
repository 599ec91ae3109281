// NOTE [Waiting for a segment]: a producer of large tensors waits for the segment it sent to
// come back instead of making (and faulting in) another one, and stops waiting for a class
// whose consumer keeps what it gets. Real processes; the consumer's release wakes the
// producer through the segment's futex.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import * as mp from '../../src/index.js';
import { segmentCache } from '../../src/sharing/index.js';
import { FRESH_PER_CREATE } from '../../src/sharing/segment-wait.js';
import { sizeClass } from '../../src/sharing/size-class.js';
import { checkLeaks } from '../helpers/leaks.js';
import { isCoded } from '../helpers/errors.js';
import { segmentOf } from '../helpers/segments.js';

checkLeaks();

const targets = new URL('./fixtures/targets.js', import.meta.url);
const target = (name: string) => ({ module: targets, export: name });
/** float32 elements of a 4 MiB tensor: its class is one that waits. */
const BIG = 1 << 20;

/** Puts a fresh large tensor on `q`, lets go of it here, and returns its segment. */
async function sendBig(q: mp.Queue<mp.Tensor>): Promise<ReturnType<typeof segmentOf>> {
  const t = mp.empty([BIG], { shared: true });
  const seg = segmentOf(t);
  await q.put(t);
  t.release();
  return seg;
}

after(() => {
  delete process.env.TENSORPROC_SEGMENT_WAIT_MS;
});

for (const strategy of ['file_descriptor', 'file_system'] as const) {
  test(`${strategy}: the next large tensor waits for the one in flight and reuses its segment`, async () => {
    mp.setSharingStrategy(strategy);
    // The bound is what a fresh segment costs (~1 ms here); the test must not depend on the
    // consumer being that quick, so it waits as long as it takes.
    process.env.TENSORPROC_SEGMENT_WAIT_MS = '60000';
    const q = new mp.Queue<mp.Tensor>();
    const ctx = mp.spawn(target('dropWhenAwaited'), { args: [q, 3], join: false });
    await ctx.started; // the child starts through this event loop, which a wait blocks
    try {
      let t = mp.empty([BIG], { shared: true }).fill(1);
      const seg = segmentOf(t);
      for (let k = 0; k < 3; k++) {
        await q.put(t);
        t.release();
        const created = segmentCache.created;
        const waited = segmentCache.waits.waited;
        t = mp.empty([BIG], { shared: true }).fill(k); // blocks until the consumer drops the last one
        assert.equal(segmentOf(t), seg, 'the segment that came back');
        assert.equal(segmentCache.created, created, 'no segment made');
        assert.equal(segmentCache.waits.waited, waited + 1);
      }
      t.release();
      assert.equal(await ctx.join(), true);
    } finally {
      q.close();
      mp.setSharingStrategy('file_descriptor');
      mp.emptyCache();
    }
  });
}

test('file_system: a consumer killed holding the awaited segment: the manager takes its hold back and wakes the producer', async () => {
  mp.setSharingStrategy('file_system');
  process.env.TENSORPROC_SEGMENT_WAIT_MS = '60000';
  const q = new mp.Queue<mp.Tensor>();
  const ctx = mp.spawn(target('dieWhenAwaited'), { args: [q], join: false });
  await ctx.started;
  try {
    const seg = await sendBig(q);
    const created = segmentCache.created;
    const u = mp.empty([BIG], { shared: true }); // blocks until the manager reclaims the dead consumer's hold
    assert.equal(segmentOf(u), seg);
    assert.equal(segmentCache.created, created);
    u.release();
    await assert.rejects(ctx.join(), isCoded(mp.ProcessExitedException, 'ERR_TP_PROCESS_EXITED'));
  } finally {
    q.close();
    mp.setSharingStrategy('file_descriptor');
    mp.emptyCache();
  }
});

test('a consumer that keeps what it gets: one wait runs out, then no more waits for that class', async () => {
  process.env.TENSORPROC_SEGMENT_WAIT_MS = '20';
  const q = new mp.Queue<mp.Tensor>();
  const ready = new mp.Event();
  const ctx = mp.spawn(target('holdAndWait'), { args: [q, ready, 2, 'file_descriptor'], join: false });
  await ctx.started;
  try {
    const segA = await sendBig(q);
    const runOut = segmentCache.waits.runOut;
    const created = segmentCache.created;
    const b = mp.empty([BIG], { shared: true }); // a is held over there: the wait runs out
    assert.notEqual(segmentOf(b), segA);
    assert.equal(segmentCache.waits.runOut, runOut + 1);
    assert.equal(segmentCache.created, created + 1);
    await q.put(b);
    b.release();
    assert.equal(await ready.wait(), true); // both are held now
    const c = mp.empty([BIG], { shared: true }); // two busy, none free: made at once
    assert.equal(segmentCache.waits.runOut, runOut + 1, 'no second wait');
    assert.equal(segmentCache.created, created + 2);
    c.release();
  } finally {
    process.kill(ctx.pids()[0]!, 'SIGKILL');
    await ctx.join().catch(() => {});
    q.close();
    ready.close();
    mp.emptyCache();
  }
});

test('a process that exits with a received segment in its backlog gives it back and wakes its waiting creator', async () => {
  // The exit hooks once ran in the wrong order: the segment was unmapped first, and giving
  // back the backlog's reference then threw, failing a child that had exited 0.
  process.env.TENSORPROC_SEGMENT_WAIT_MS = '60000';
  const q = new mp.Queue<mp.Tensor>();
  const stuck = new mp.Queue();
  const ready = new mp.Event();
  const ctx = mp.spawn(target('forwardIntoBacklogThenExit'), { args: [q, stuck, ready], join: false });
  await ctx.started;
  try {
    const seg = await sendBig(q);
    assert.equal(await ready.wait(), true);
    // Blocks until the child's exit gives back both its references (or for the whole bound).
    const t = mp.empty([BIG], { shared: true });
    assert.equal(segmentOf(t), seg, 'the segment came back');
    t.release();
    assert.equal(await ctx.join(), true, 'the child exited 0');
  } finally {
    q.close();
    stuck.close();
    ready.close();
    mp.emptyCache();
  }
});

test('without an override a class waits for what making one of its segments was measured to cost here', () => {
  delete process.env.TENSORPROC_SEGMENT_WAIT_MS;
  const bytes = 24 << 20; // a class no other test here makes
  const cls = sizeClass(bytes);
  assert.equal(segmentCache.waits.createCostMs(cls), undefined, 'not made yet');
  assert.ok(segmentCache.waits.boundMs(cls) > 0, 'a bound from the page model until then');
  try {
    for (let k = 0; k < 2; k++) {
      mp.empty([bytes / 4], { shared: true }).release();
      mp.emptyCache(); // the next one is made afresh, and timed
    }
    const cost = segmentCache.waits.createCostMs(cls)!;
    assert.ok(Number.isFinite(cost) && cost > 0, `a timing: ${cost}`);
    assert.equal(segmentCache.waits.boundMs(cls), cost * FRESH_PER_CREATE, 'the bound follows the timing');
    mp.empty([1 << 18], { shared: true }).release();
    assert.equal(segmentCache.waits.createCostMs(sizeClass(1 << 20)), undefined, 'a class that never waits is not timed');
    process.env.TENSORPROC_SEGMENT_WAIT_MS = '5';
    assert.equal(segmentCache.waits.boundMs(cls), 5, 'the override wins');
  } finally {
    delete process.env.TENSORPROC_SEGMENT_WAIT_MS;
    mp.emptyCache();
  }
});
