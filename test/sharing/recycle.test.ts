// NOTE [Segment recycling]: a released tensor's segment is reused with no new system call
// and no new mapping; a segment still held elsewhere is not.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync } from 'node:fs';
import * as mp from '../../src/index.js';
import { addon } from '../../src/native/index.js';
import { segmentCache, exportStorage, type Lease } from '../../src/sharing/index.js';
import { checkLeaks, collectGarbage } from '../helpers/leaks.js';
import { waitFor } from '../helpers/wait.js';
import { segmentOf } from '../helpers/segments.js';

checkLeaks();

for (const strategy of ['file_descriptor', 'file_system'] as const) {
  test(`${strategy}: a released segment is reused, with no new mapping`, () => {
    mp.setSharingStrategy(strategy);
    try {
      const a = mp.full([1000], 3, { shared: true });
      const seg = segmentOf(a);
      assert.equal(seg.strategy, strategy);
      a.release();
      const [maps, unmaps] = addon.mappingStats();
      const created = segmentCache.created;
      for (let i = 0; i < 100; i++) {
        const b = mp.empty([900 + i], { shared: true }); // same size class
        assert.equal(segmentOf(b), seg);
        b.fill(i);
        b.release();
      }
      assert.deepEqual(addon.mappingStats(), [maps, unmaps]);
      assert.equal(segmentCache.created, created);
      const z = mp.zeros([1000], { shared: true });
      assert.equal(segmentOf(z), seg);
      assert.ok(
        (z.data as Float32Array).every((x) => x === 0),
        'zeros() clears a recycled segment',
      );
      z.release();
    } finally {
      mp.setSharingStrategy('file_descriptor');
    }
  });
}

test('a collected tensor gives its segment back', async () => {
  mp.emptyCache();
  let seg = (() => segmentOf(mp.empty([4096], { shared: true })))();
  for (let i = 0; i < 10 && segmentCache.freeBytes === 0; i++) await collectGarbage();
  const t = mp.empty([4096], { shared: true });
  assert.equal(segmentOf(t), seg);
  t.release();
  seg = null as any;
});

test('a segment another holder still references is not reused until it lets go', () => {
  const a = mp.empty([256], { shared: true });
  const seg = segmentOf(a);
  const exported = exportStorage(a.storage); // a message in flight holds a reference
  assert.equal(seg.refcount(), 2);
  a.release();
  const b = mp.empty([256], { shared: true });
  assert.notEqual(segmentOf(b), seg, 'busy: a fresh segment instead');
  seg.unref(); // the receiver let go
  const c = mp.empty([256], { shared: true });
  assert.equal(segmentOf(c), seg, 'free everywhere: recycled');
  b.release();
  c.release();
  void exported;
});

test('zeros() writes a recycled segment, and leaves a segment just made (the kernel zeroed it) alone', () => {
  mp.emptyCache();
  const a = mp.zeros([3000], { shared: true });
  assert.equal((a.storage.backing as Lease).zeroed, true, 'made for it');
  a.fill(7);
  const seg = segmentOf(a);
  a.release();
  const b = mp.zeros([3000], { shared: true });
  assert.equal(segmentOf(b), seg, 'recycled');
  assert.equal((b.storage.backing as Lease).zeroed, false);
  assert.ok(
    (b.toArray() as number[]).every((x) => x === 0),
    'the old 7s are gone',
  );
  b.release();
});

test('different size classes do not mix; strategies do not mix', () => {
  const small = mp.empty([10], { shared: true });
  const segSmall = segmentOf(small);
  small.release();
  const big = mp.empty([1 << 20], { shared: true });
  assert.notEqual(segmentOf(big), segSmall);
  big.release();
  mp.setSharingStrategy('file_system');
  try {
    const fs = mp.empty([10], { shared: true });
    assert.notEqual(segmentOf(fs), segSmall);
    assert.equal(segmentOf(fs).strategy, 'file_system');
    fs.release();
  } finally {
    mp.setSharingStrategy('file_descriptor');
  }
});

test('a buffer transferred away before release keeps its segment out of reuse until it dies', async () => {
  mp.emptyCache();
  const t = mp.full([1024], 42, { shared: true });
  const seg = segmentOf(t);
  // The user moves the tensor's buffer elsewhere (as postMessage with transfer does): the
  // sender's buffer is detached, the memory lives on in the moved one.
  let moved: Float32Array | null = new Float32Array(structuredClone(t.data.buffer, { transfer: [t.data.buffer as ArrayBuffer] }));
  t.release();
  const u = mp.empty([1024], { shared: true });
  assert.notEqual(segmentOf(u), seg, 'the segment is not handed out while the moved buffer lives');
  u.fill(7);
  assert.equal(moved[0], 42, 'the moved buffer still sees its own data');
  u.release();
  // a released tensor whose buffer simply escaped (not moved) is reused at once
  const v = mp.empty([16], { shared: true });
  const vseg = segmentOf(v);
  void v.data;
  v.release();
  const w = mp.empty([16], { shared: true });
  assert.equal(segmentOf(w), vseg);
  w.release();
  moved = null;
  for (let i = 0; i < 20 && seg.liveBuffers() > 0; i++) await collectGarbage();
  const x = mp.empty([1024], { shared: true });
  assert.equal(segmentOf(x), seg, 'once the moved buffer is collected, the segment is recycled');
  x.release();
});

test('a received buffer moved away keeps its segment held while it lives, released or collected, and gives it back once dead', async () => {
  // NOTE [Moved buffers], received side. Once, a received tensor collected (not released)
  // with its buffer moved gave the segment back while the buffer lived on (its producer
  // refilled it under the reader), and a released one never gave it back at all.
  mp.emptyCache();
  const q = new mp.SimpleQueue<mp.Tensor>();
  for (const end of ['released', 'collected'] as const) {
    const t = mp.full([1024], 1, { shared: true });
    const seg = segmentOf(t);
    await q.put(t);
    t.release();
    let r: mp.Tensor | null = await q.get(); // a second mapping of the segment: a received one
    const received = segmentOf(r);
    assert.notEqual(received, seg);
    let moved: Float32Array | null = new Float32Array(structuredClone(r.data.buffer, { transfer: [r.data.buffer as ArrayBuffer] }));
    if (end === 'released') r.release();
    r = null;
    await collectGarbage(); // the received tensor's lease ends here if it was not released
    const u = mp.empty([1024], { shared: true });
    assert.notEqual(segmentOf(u), seg, `${end}: not handed out while the moved buffer lives`);
    u.fill(2);
    assert.equal(moved[0], 1, `${end}: the moved buffer still sees its own data`);
    u.release();
    moved = null;
    // Given back once the moved buffer is dead (a timer looks, and so does emptyCache()).
    await waitFor(async () => {
      await collectGarbage();
      return seg.refcount() === 1;
    }, 10_000);
    assert.equal(received.liveBuffers(), 0);
    mp.emptyCache();
  }
  q.close();
});

test('a received tensor dropped without release() gives its segment back soon after it is collected', async () => {
  // Its buffer's memory is freed by V8 a little after the finalizer ran: the segment waits in
  // `outliving` for that, and a timer looks again (NOTE [Moved buffers]).
  mp.emptyCache();
  const q = new mp.SimpleQueue<mp.Tensor>();
  const t = mp.full([1024], 1, { shared: true });
  const seg = segmentOf(t);
  await q.put(t);
  t.release();
  let r: mp.Tensor | null = await q.get();
  assert.equal(seg.refcount(), 2);
  r.get(0);
  r = null;
  await waitFor(async () => {
    await collectGarbage();
    return seg.refcount() === 1;
  }, 10_000);
  q.close();
  mp.emptyCache();
});

test('segments that come back out of order are reused though an older one is still held', () => {
  mp.emptyCache();
  const ts = [0, 1, 2].map(() => mp.empty([256], { shared: true }));
  const segs = ts.map(segmentOf);
  for (const t of ts) {
    exportStorage(t.storage); // each in flight
    t.release();
  }
  // The receiver keeps the oldest and lets go of the two after it.
  segs[1]!.unref();
  segs[2]!.unref();
  const created = segmentCache.created;
  const x = mp.empty([256], { shared: true });
  const y = mp.empty([256], { shared: true });
  assert.deepEqual(new Set([segmentOf(x), segmentOf(y)]), new Set([segs[1], segs[2]]), 'both came back into use');
  assert.equal(segmentCache.created, created, 'no segment was made for them');
  const z = mp.empty([256], { shared: true });
  assert.ok(!segs.includes(segmentOf(z)), 'the one still held is not reused');
  segs[0]!.unref(); // the receiver lets go of the last
  for (const t of [x, y, z]) t.release();
  const w = mp.empty([256], { shared: true });
  assert.equal(segmentCache.created, created + 1);
  w.release();
});

test('the free lists keep at most 1024 segments, whatever their size: empty tensors are not kept for ever', () => {
  // Each kept segment holds a descriptor and a mapping; empty tensors (class 0) never reached
  // the byte bound, so releasing many of them once kept a descriptor open for each.
  mp.emptyCache();
  const fds = (): number => readdirSync('/proc/self/fd').length;
  const before = fds();
  const ts = Array.from({ length: 1500 }, () => mp.empty([0], { shared: true }));
  for (const t of ts) t.release();
  assert.equal(segmentCache.freeCount, 1024);
  assert.ok(fds() - before <= 1024, `${fds() - before} descriptors held by the cache`);
  mp.emptyCache();
  assert.equal(segmentCache.freeCount, 0);
  assert.equal(fds(), before);
});
