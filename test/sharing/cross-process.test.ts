// A tensor written in one process is read and written in another, without a copy, under
// each strategy. (Queues come later; here the handle travels as JSON and the memfd as fd 3.)
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync } from 'node:fs';
import * as mp from '../../src/index.js';
import { exportStorage, importStorage, abandonExport, receiveCache, Segment } from '../../src/sharing/index.js';
import { addon } from '../../src/native/index.js';
import { checkLeaks } from '../helpers/leaks.js';
import { isCoded } from '../helpers/errors.js';
import { startPeer, fixture } from '../helpers/child.js';
import { segmentOf } from '../helpers/segments.js';

checkLeaks();
const peerScript = fixture(import.meta.url, 'peer.js');

for (const strategy of ['file_descriptor', 'file_system'] as const) {
  test(`${strategy}: writes are visible both ways, and the segment goes when both let go`, async () => {
    mp.setSharingStrategy(strategy);
    const t = mp.tensor([1, 2, 3, 4]);
    let name: string | null = null;
    try {
      const { handle, fd } = exportStorage(t.storage);
      assert.ok(t.isShared(), 'export moved the tensor into shared memory');
      const seg = segmentOf(t);
      name = seg.name;
      assert.equal(strategy === 'file_system', name !== null && readdirSync('/dev/shm').includes(name.slice(1)));
      const peer = startPeer(peerScript, [], { fds: fd === null ? [] : [fd] });
      peer.send({ cmd: 'open', handle, shape: [4] });
      const r = await peer.next();
      assert.deepEqual(r.values, [1, 2, 3, 4]);
      assert.equal(r.refcount, 2, 'the peer adopted the reference added for it');
      assert.deepEqual(t.toArray(), [10, 20, 30, 40], 'the peer wrote into our memory');
      t.set([0], -5);
      peer.send({ cmd: 'read' });
      assert.deepEqual((await peer.next()).values, [-5, 20, 30, 40]);
      peer.send({ cmd: 'release' });
      await peer.next();
      assert.equal(seg.refcount(), 1);
      peer.send({ cmd: 'exit' });
      await peer.exited;
    } finally {
      t.release();
      mp.emptyCache();
      mp.setSharingStrategy('file_descriptor');
    }
    if (name !== null) assert.ok(!readdirSync('/dev/shm').includes(name.slice(1)), 'the name is removed');
  });
}

test('a storage received twice is one storage; two views of it share memory', () => {
  const t = mp.tensor([1, 2, 3, 4, 5, 6], { shape: [2, 3] }).shareMemory();
  const a = exportStorage(t.storage);
  const b = exportStorage(t.storage);
  const seg = segmentOf(t);
  assert.equal(seg.refcount(), 3);
  // receiving in this very process gives back the same storage and drops the extra references
  const s1 = importStorage(a.handle, a.fd === null ? null : addon.dup(a.fd));
  const s2 = importStorage(b.handle, b.fd === null ? null : addon.dup(b.fd));
  assert.equal(s1, t.storage);
  assert.equal(s2, t.storage);
  assert.equal(seg.refcount(), 1);
  t.release();
});

test('file_descriptor: the identity hint only finds mappings this process has; a wrong hint costs an fstat, not the data', () => {
  const t = mp.full([4], 7, { shared: true });
  const a = exportStorage(t.storage);
  assert.match(a.handle.name!, /^fd:\d+:\d+$/, 'the sender names the memfd by its identity');
  // this process holds the segment: the hint finds it, the same storage comes back
  assert.equal(importStorage(a.handle, addon.dup(a.fd!)), t.storage);
  // a hint naming nothing known here: the segment is identified by its descriptor
  const b = exportStorage(t.storage);
  const other = importStorage({ ...b.handle, name: 'fd:0:0' }, addon.dup(b.fd!));
  assert.equal(other, t.storage, 'fstat found the real identity');
  t.release();
});

test('a handle to a vanished segment is ERR_TP_SEGMENT_GONE; a lying handle ERR_TP_BAD_HANDLE', () => {
  assert.throws(
    () => importStorage({ strategy: 'file_system', name: '/tensorproc_1_0000000000000000', offset: 0, nbytes: 4 }, null),
    isCoded(mp.SegmentGoneError, 'ERR_TP_SEGMENT_GONE'),
  );
  const t = mp.empty([4], { shared: true });
  const { handle, fd } = exportStorage(t.storage);
  assert.throws(() => importStorage({ ...handle, nbytes: 1 << 30 }, addon.dup(fd!)), isCoded(mp.BadHandleError, 'ERR_TP_BAD_HANDLE'));
  assert.throws(() => importStorage({ ...handle }, null), isCoded(mp.BadHandleError, 'ERR_TP_BAD_HANDLE'));
  assert.equal(segmentOf(t).refcount(), 1, 'the refused message did not keep its reference');
  t.release();
});

test('a refused handle to a parked segment drops its reference', () => {
  const t = mp.full([256], 1, { shared: true }); // a segment of its own, above PACK_BYTES (NOTE [Packed small storages])
  const seg = segmentOf(t);
  // Receive the segment as another process would (a Segment object of its own), then let it
  // go: its mapping is parked in the receive cache.
  seg.retain();
  const other = Segment.openFd(addon.dup(seg.fd!), 16);
  other.adoptInFlight();
  other.unref();
  receiveCache.park(other);
  assert.equal(seg.refcount(), 1);
  // A message naming the parked segment but claiming more than it holds is refused...
  seg.retain();
  assert.throws(
    () => importStorage({ strategy: 'file_descriptor', name: null, offset: 0, nbytes: seg.capacity + 1 }, addon.dup(seg.fd!)),
    isCoded(mp.BadHandleError, 'ERR_TP_BAD_HANDLE'),
  );
  // ...and its reference does not stay behind, pinning the segment
  assert.equal(seg.refcount(), 1);
  t.release();
  mp.emptyCache();
});

test('a storage that moved to another segment is not mistaken for a later arrival of its old one', () => {
  // The real flow: a worker receives X (and closes its descriptor after mapping), sends X on
  // (exportStorage moves it into a segment of the worker's own: rebase), so the producer's
  // segment is free again; the producer refills it with Y and sends Y to the worker, while
  // X is still alive there. Y must arrive as Y, not as X.
  // Above PACK_BYTES: a segment of its own, which rebase() leaves (NOTE [Packed small storages]).
  const x = mp.full([256], 1, { shared: true });
  const old = segmentOf(x);
  abandonExport(exportStorage(x.storage)); // the storage is now remembered under old's key
  x.storage.rebase();
  const moved = segmentOf(x);
  assert.notEqual(moved, old);
  const y = mp.full([256], 2, { shared: true });
  assert.equal(segmentOf(y), old, 'the old segment was recycled');
  // Y's segment arrives as from another process: its sender added a reference and sent the fd.
  old.retain();
  const got = importStorage({ strategy: 'file_descriptor', name: null, offset: 0, nbytes: 16 }, addon.dup(old.fd!));
  assert.notEqual(got, x.storage);
  assert.deepEqual(new mp.Tensor(got, 'float32', [4]).toArray(), [2, 2, 2, 2]);
  assert.equal(moved.refcount(), 1, "x's new segment lost no reference");
  // This process holds the segment already (y): the arrival is a lease of its own over the
  // same mapping and adopts no reference (NOTE [Packed small storages]).
  assert.equal(old.refcount(), 1, 'the message reference was dropped, not kept');
  got.release();
  assert.equal(old.refcount(), 1);
  x.release();
  y.release();
  mp.emptyCache();
});
