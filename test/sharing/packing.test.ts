// NOTE [Packed small storages] (src/sharing/packing.ts): small shared storages are pieces of
// slab segments, so that a receiver maps one segment per slab, not one per tensor; a slab is
// reused whole, and only once every piece of it is released everywhere.
import { test, afterEach } from 'node:test';
import assert from 'node:assert/strict';
import * as mp from '../../src/index.js';
import { PACK_BYTES, PIECE_ALIGN, SLAB_BYTES, segmentCache, slabs, type Lease, type Segment } from '../../src/sharing/index.js';
import { checkLeaks, collectGarbage } from '../helpers/leaks.js';
import { reap } from '../helpers/procs.js';
import { segmentOf } from '../helpers/segments.js';
import type { HeldReport, PiecesReport } from './fixtures/packing-targets.js';

checkLeaks();

const targets = new URL('./fixtures/packing-targets.js', import.meta.url);
const target = (name: string) => ({ module: targets, export: name });
const STRATEGIES = ['file_descriptor', 'file_system'] as const;
/** 16 float32: 64 bytes, one aligned piece. */
const small = (k: number): mp.Tensor => mp.full([16], k, { shared: true });

afterEach(() => mp.setSharingStrategy('file_descriptor'));

/** Allocates small tensors until one lands in another slab than `seg`; releases the rest and returns that one. */
function nextSlab(seg: Segment): mp.Tensor {
  const made: mp.Tensor[] = [];
  try {
    for (let k = 0; k <= SLAB_BYTES / PIECE_ALIGN; k++) {
      const t = small(-1);
      if (segmentOf(t) !== seg) return t;
      made.push(t);
    }
    throw new Error('no other slab was opened');
  } finally {
    for (const t of made) t.release();
  }
}

test('small storages are aligned pieces of one slab, each buffer exactly its bytes; larger ones are segments of their own', () => {
  mp.emptyCache();
  assert.ok(PACK_BYTES >= 64 && PACK_BYTES < 1024, `PACK_BYTES ${PACK_BYTES}`);
  const ts = [small(0), mp.full([3], 1, { shared: true, dtype: 'uint8' }), small(2), mp.full([PACK_BYTES / 4], 3, { shared: true })];
  const seg = segmentOf(ts[0]!);
  assert.ok(
    ts.every((t) => segmentOf(t) === seg),
    'one slab',
  );
  const offsets = ts.map((t) => (t.storage.backing as Lease).offset);
  assert.deepEqual(offsets, [0, 64, 128, 192]);
  assert.deepEqual(
    ts.map((t) => t.storage.buffer.byteLength),
    [64, 3, 64, PACK_BYTES],
  );
  // A write through one piece's buffer, to its last byte, leaves its neighbours alone.
  new Uint8Array(ts[1]!.storage.buffer).fill(9);
  assert.deepEqual(ts[1]!.toArray(), [9, 9, 9]);
  assert.deepEqual(ts[0]!.toArray(), Array(16).fill(0));
  assert.deepEqual(ts[2]!.toArray(), Array(16).fill(2));
  const big = mp.full([PACK_BYTES / 4 + 1], 4, { shared: true });
  assert.notEqual(segmentOf(big), seg, 'above PACK_BYTES: a segment of its own');
  assert.equal(segmentOf(big).capacity < SLAB_BYTES, true);
  for (const t of [...ts, big]) t.release();
  mp.emptyCache();
});

/** The buffer a piece's lease holds, read without the user's path (which would mark it seen). */
const bufferOf = (t: mp.Tensor): ArrayBuffer => (t.storage.backing as Lease).buffer;

/** Allocates and releases small tensors until `seg`, an open slab, is full: the next piece closes it. */
function fillSlab(seg: Segment, from: number): void {
  for (let k = from; k < Math.floor(seg.capacity / PIECE_ALIGN); k++) {
    const t = small(-1);
    assert.equal(segmentOf(t), seg);
    t.release();
  }
}

test('NOTE [Piece buffers]: a piece buffer no user saw is handed out again at its offset when its slab is reused; one a user saw, or moved away, never is', async () => {
  mp.emptyCache();
  const a = small(1);
  const seg = segmentOf(a);
  const b = small(2);
  const kept = bufferOf(a);
  const seen = b.data; // b's buffer reaches user code
  const seenBuffer = bufferOf(b);
  a.release();
  b.release();
  assert.equal(seen.length, 0, 'a buffer the user saw is detached at release');
  fillSlab(seg, 2);
  // Nothing holds the full slab: the next piece closes it, and the cache hands it out again at once.
  const x = small(4);
  const y = small(5);
  assert.equal(segmentOf(x), seg, 'the slab is reused');
  assert.deepEqual([(x.storage.backing as Lease).offset, (y.storage.backing as Lease).offset], [0, 64]);
  assert.equal(bufferOf(x), kept, 'the unseen buffer at offset 0 is reused');
  assert.notEqual(bufferOf(y), seenBuffer, 'the seen one is not: a fresh buffer');
  assert.equal(seen.length, 0, 'the old view stays empty');
  assert.deepEqual([x.toArray(), y.toArray()], [Array(16).fill(4), Array(16).fill(5)]);
  // A buffer moved to elsewhere (postMessage / structuredClone with transfer) lives on: its
  // slab is not reused while it does, whatever unseen buffers the slab keeps.
  let moved: Float32Array | null = new Float32Array(structuredClone(x.data.buffer, { transfer: [x.data.buffer as ArrayBuffer] }));
  x.release();
  y.release();
  fillSlab(seg, 2);
  const z = small(6);
  const zslab = segmentOf(z);
  assert.notEqual(zslab, seg, 'not handed out while the moved buffer lives');
  assert.equal(moved[0], 4, 'the moved buffer still sees its own data');
  z.release();
  fillSlab(zslab, 1);
  moved = null;
  for (let i = 0; i < 20 && seg.liveBuffers() > 0; i++) await collectGarbage();
  assert.equal(seg.liveBuffers(), 0, 'the kept buffers do not count as alive');
  const w = small(7); // closes z's slab; the cache gives back the most recently freed: seg, now free
  assert.equal(segmentOf(w), seg, 'reused once the moved buffer is collected');
  assert.notEqual(bufferOf(w), kept, 'the moved buffer is never handed out again');
  w.release();
  mp.emptyCache();
});

for (const strategy of STRATEGIES) {
  test(`${strategy}: pieces of one slab in different messages are distinct storages over one mapping; the receiver's write is the sender's memory and touches no neighbour; the slab is reused only once every piece is released everywhere`, async () => {
    mp.setSharingStrategy(strategy);
    mp.emptyCache();
    const first = small(0);
    const slab = segmentOf(first);
    const all = [first];
    while (all.length < SLAB_BYTES / PIECE_ALIGN) all.push(small(all.length));
    assert.ok(
      all.every((t) => segmentOf(t) === slab),
      'the slab holds them all',
    );
    const [p0, p1, p2] = all as [mp.Tensor, mp.Tensor, mp.Tensor];
    for (const t of all.slice(3)) t.release();
    const q = new mp.Queue<mp.Tensor | number>();
    const out = new mp.Queue<PiecesReport | number>();
    const ctx = mp.spawn(target('pieces'), { args: [q, out, strategy], join: false });
    try {
      for (const t of [p0, p1, p2, p0]) await q.put(t);
      const r = (await out.get()) as PiecesReport;
      assert.deepEqual(r, {
        distinct: true,
        sameSegment: true,
        again: true,
        values: [Array(16).fill(0), Array(16).fill(1), Array(16).fill(2)],
      });
      assert.equal(await out.get(), 1);
      assert.deepEqual(p1.toArray(), Array(16).fill(100), "the receiver's write is in the sender's memory");
      assert.deepEqual([p0.toArray(), p2.toArray()], [Array(16).fill(0), Array(16).fill(2)], 'its neighbours are untouched');
      assert.equal(all[3]!.storage.isReleased(), true);
      for (const t of [p0, p1, p2]) t.release();
      // The slab is full and this process holds none of it: it is closed when the next piece
      // needs room, and goes back to the cache, busy while the child holds its pieces.
      const held: mp.Tensor[] = [];
      held.push(nextSlab(slab));
      for (let k = 1; k <= 4; k++) {
        const created = segmentCache.created;
        const next = nextSlab(segmentOf(held.at(-1)!));
        held.push(next);
        if (k < 4) {
          assert.notEqual(segmentOf(next), slab, `not reused while the child holds ${4 - k} of its pieces`);
          assert.equal(segmentCache.created, created + 1, 'a new slab instead');
          await q.put(k);
          assert.equal(await out.get(), k); // the child released one more piece
        } else {
          assert.equal(segmentOf(next), slab, 'reused once every piece is released everywhere');
          assert.equal(segmentCache.created, created, 'no new segment');
        }
      }
      for (const t of held) t.release();
      assert.equal(await ctx.join(), true);
    } finally {
      await reap(ctx);
      q.close();
      out.close();
      mp.emptyCache();
    }
  });

  test(`${strategy}: 100,000 small tensors received one per message are held alive under a 256-descriptor limit and the real vm.max_map_count`, async () => {
    mp.setSharingStrategy(strategy);
    mp.emptyCache();
    const n = 100_000;
    const q = new mp.Queue<mp.Tensor>({ maxsize: 256 });
    const out = new mp.Queue<HeldReport>();
    const go = new mp.Event();
    const opened = slabs.opened;
    const ctx = mp.spawn(target('holdSmall'), { args: [q, out, go, n, strategy], join: false });
    try {
      for (let k = 0; k < n; k++) {
        const t = small(k);
        await q.put(t);
        t.release(); // the producer lets go of its own copy at once
      }
      const r = await out.get();
      const slabsNeeded = Math.ceil(n / (SLAB_BYTES / PIECE_ALIGN));
      assert.equal(r.bad, 0, `${r.bad} tensors arrived wrong`);
      assert.equal(r.storages, n, 'every tensor its own storage');
      assert.ok(
        r.segments >= slabsNeeded && r.segments <= slabsNeeded + 2,
        `they lie in ${r.segments} segments (${slabsNeeded} slabs needed)`,
      );
      assert.ok(r.mapped < slabsNeeded + 50, `the receiver maps ${r.mapped} segments`);
      assert.ok(r.fds < 200, `the receiver holds ${r.fds} descriptors`);
      assert.ok(slabs.opened - opened <= slabsNeeded + 2, `the producer opened ${slabs.opened - opened} slabs`);
      go.set();
      const after = await out.get();
      assert.equal(after.mapped, 0, 'released and emptied: nothing mapped');
      assert.equal(await ctx.join(), true);
    } finally {
      await reap(ctx);
      q.close();
      out.close();
      go.close();
      mp.emptyCache();
    }
  });
}
