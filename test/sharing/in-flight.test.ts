// NOTE [Orphans in flight]: the owner of a memfd takes back the references of messages that are
// gone (here: in a socket closed everywhere) and never those of messages still in a socket,
// however many housekeeping passes run.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as mp from '../../src/index.js';
import { segmentCache } from '../../src/sharing/index.js';
import { checkLeaks } from '../helpers/leaks.js';
import { segmentOf } from '../helpers/segments.js';

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
