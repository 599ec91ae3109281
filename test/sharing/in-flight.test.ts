// NOTE [Orphans in flight]: the owner of a memfd takes back the references of messages that are
// gone (here: in a socket closed everywhere) and never those of messages still in a socket,
// however many housekeeping passes run.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as mp from '../../src/index.js';
import { binnedCount, segmentCache } from '../../src/sharing/index.js';
import { checkLeaks } from '../helpers/leaks.js';
import { segmentOf } from '../helpers/segments.js';
import { waitFor } from '../helpers/wait.js';

checkLeaks();

const passes = (n: number): void => {
  for (let i = 0; i < n; i++) segmentCache.housekeeping();
};

test('file_descriptor: a message still in a queue keeps its segment busy through any number of housekeeping passes', async () => {
  const q = new mp.Queue<mp.Tensor>();
  try {
    const x = mp.full([1 << 18], 7, { dtype: 'int32', shared: true });
    const seg = segmentOf(x);
    await q.put(x);
    x.release();
    passes(6);
    assert.ok(segmentCache.busySegments().includes(seg), 'still busy: its message waits in the queue');
    assert.equal(seg.refcount(), 2);
    const y = await q.get();
    assert.equal(y.get(0), 7);
    assert.equal(y.get((1 << 18) - 1), 7);
    y.release();
    passes(1);
    assert.ok(!segmentCache.busySegments().includes(seg), 'back once its receiver let go');
  } finally {
    q.close();
    mp.emptyCache();
  }
});

test('file_descriptor: the reference of a message lost in a socket closed everywhere comes back', async () => {
  const q = new mp.Queue<mp.Tensor>();
  const x = mp.full([1 << 18], 7, { dtype: 'int32', shared: true });
  const seg = segmentOf(x);
  await q.put(x);
  await q.joinThread();
  x.release();
  q.close(); // the message, with its descriptor, is dropped with the socket
  passes(3);
  assert.ok(!segmentCache.busySegments().includes(seg), 'the lost message no longer holds it');
  assert.equal(seg.refcount(), 1);
  // Reused, and sent again (from the probe's descriptor), it travels as before.
  const z = mp.empty([1 << 18], { dtype: 'int32', shared: true }).fill(9);
  assert.equal(segmentOf(z), seg);
  const [a, b] = mp.Pipe<mp.Tensor>();
  try {
    await a.send(z);
    z.release();
    const w = await b.recv();
    assert.equal(w.get(1000), 9);
    w.release();
  } finally {
    a.close();
    b.close();
    mp.emptyCache();
  }
});

// NOTE [Witness bin]: a receiver of a steady file_system stream closes the witnesses in
// batches, not each as it decodes; the housekeeping tick closes what is left, so an owner
// still sees the epoch of a lost message end, and takes its reference back.
test('file_system: witnesses binned by a steady receiver close at the next tick; a lost message still comes back', async () => {
  mp.setSharingStrategy('file_system');
  const q = new mp.Queue<mp.Tensor>();
  const lost = new mp.Queue<mp.Tensor>();
  try {
    for (let k = 0; k < 1100; k++) {
      const t = mp.full([256], k, { shared: true });
      await q.put(t);
      t.release();
      const r = await q.get();
      assert.equal(r.get(255), k);
      r.release();
    }
    assert.ok(binnedCount() > 0, 'past 1024 datagrams that needed no slot, witnesses are binned');
    const x = mp.full([256], 5, { shared: true });
    const seg = segmentOf(x);
    await lost.put(x);
    await lost.joinThread();
    x.release();
    lost.close(); // the message, with its witness, is dropped with the socket
    // The allocator's own timer: the bin is closed, the epoch ends, the reference comes back.
    await waitFor(() => binnedCount() === 0 && seg.refcount() === 1);
    assert.ok(!segmentCache.busySegments().includes(seg));
  } finally {
    q.close();
    mp.setSharingStrategy('file_descriptor');
    mp.emptyCache();
  }
});
