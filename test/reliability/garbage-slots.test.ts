// A bounded queue's slots under garbage (NOTE [Queue slots]): a datagram no tensorproc process
// sent took no slot, so dropping it gives none back. Counted, each one made qsize() one lower
// (negative) and let the queue hold one message more than maxsize, for good. A real peer of
// the same user writes the datagrams into the queue's socket (test/queue/fixtures).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as mp from '../../src/index.js';
import { encodeMessage } from '../../src/transport/index.js';
import { checkLeaks } from '../helpers/leaks.js';
import { isCoded } from '../helpers/errors.js';
import { startPeer, type Peer } from '../helpers/child.js';

checkLeaks();

const peerScript = new URL('../queue/fixtures/hostile-peer.js', import.meta.url).pathname;

function hostile(q: mp.Queue): Peer {
  const frame = encodeMessage(q); // borrows the queue's descriptors: [send, recv, state]
  try {
    return startPeer(peerScript, [], { fds: [frame.fds[0]!] });
  } finally {
    frame.abandon();
  }
}

async function ask(peer: Peer, msg: Record<string, unknown>): Promise<void> {
  peer.send(msg);
  const r = await peer.next();
  if (r.error) throw Object.assign(new Error(r.error.message), r.error);
}

test('garbage gives back no slot of a bounded queue: qsize() stays 0 and maxsize holds', async () => {
  const q = new mp.Queue<unknown>({ maxsize: 2 });
  const peer = hostile(q);
  try {
    // Frames of an unknown kind (0xff), with and without a descriptor: each reaches the
    // decoder (unlike an empty or oversized datagram, refused before it).
    for (let k = 0; k < 5; k++) await ask(peer, k % 2 ? { cmd: 'bytes', hex: 'ff01' + '00'.repeat(k) } : { cmd: 'bytesWithFd', hex: 'ff01' });
    for (let k = 0; k < 5; k++) await assert.rejects(q.get({ timeout: 10_000 }), isCoded(mp.FrameDecodeError, 'ERR_TP_BAD_FRAME'));
    assert.equal(q.qsize(), 0, 'no slot was given back for the garbage');
    await q.put(1, { timeout: 10_000 });
    await q.put(2, { timeout: 10_000 });
    assert.equal(q.qsize(), 2);
    await assert.rejects(q.put(3, { timeout: 0 }), isCoded(mp.QueueFullError, 'ERR_TP_QUEUE_FULL'), 'maxsize still holds');
    assert.equal(await q.get({ timeout: 10_000 }), 1);
    assert.equal(await q.get({ timeout: 10_000 }), 2);
    assert.equal(q.qsize(), 0);
  } finally {
    peer.child.kill('SIGKILL');
    await peer.exited;
    q.close();
  }
});
