// The machine's limits are coded errors, never a crash: a full /dev/shm (a small tmpfs in a
// private mount namespace) and a low open-file limit.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as mp from 'tensorproc';
import { checkLeaks } from '../helpers/leaks.js';
import { isCoded } from '../helpers/errors.js';
import { startPeer, fixture } from '../helpers/child.js';

checkLeaks();
const peerScript = fixture(import.meta.url, 'peer.js');

// A private mount namespace needs root (CAP_SYS_ADMIN); elsewhere the test is skipped.
const canUnshare = spawnSync('unshare', ['-m', 'true']).status === 0;
const smallShm = (kib: number) => ['unshare', '-m', 'sh', '-c', `mount -t tmpfs -o size=${kib}k tmpfs /dev/shm && exec "$@"`, 'sh'];

test('a segment bigger than the free /dev/shm is ERR_TP_SHM_FULL, with nothing left behind', {
  skip: !canUnshare && 'needs unshare -m (root)',
}, async () => {
  const peer = startPeer(peerScript, [], { wrap: smallShm(512) });
  try {
    // 600 KiB: below the up-front room check, so the kernel's ENOSPC from fallocate is what
    // turns into the error (without fallocate this would be a SIGBUS on first touch).
    peer.send({ cmd: 'allocMany', strategy: 'file_system', elements: (600 << 10) / 4, max: 1 });
    let r = await peer.next();
    assert.equal(r.count, 0);
    assert.deepEqual([r.error.name, r.error.code], ['ShmFullError', 'ERR_TP_SHM_FULL']);
    assert.match(r.error.message, /--shm-size|shm clean/);
    // 4 MiB: refused by the room check before any system call.
    peer.send({ cmd: 'allocMany', strategy: 'file_system', elements: 1 << 20, max: 1 });
    r = await peer.next();
    assert.deepEqual([r.error.name, r.error.code], ['ShmFullError', 'ERR_TP_SHM_FULL']);
    assert.match(r.error.message, /\/dev\/shm has/);
    // Filling it up with small ones: the first that does not fit fails cleanly.
    peer.send({ cmd: 'allocMany', strategy: 'file_system', elements: 16 << 10, max: 1000 });
    r = await peer.next();
    assert.ok(r.count > 0 && r.count < 1000);
    assert.deepEqual([r.error.name, r.error.code], ['ShmFullError', 'ERR_TP_SHM_FULL']);
    peer.send({ cmd: 'ls' });
    assert.deepEqual((await peer.next()).shm, [], 'no segment left in the full /dev/shm');
    peer.send({ cmd: 'exit' });
    assert.deepEqual(await peer.exited, { code: 0, signal: null }, 'no SIGBUS, no crash');
  } finally {
    peer.child.kill('SIGKILL');
  }
});

test('shapes beyond memory are ERR_TP_SHM_FULL, not the OOM killer', () => {
  for (const strategy of ['file_descriptor', 'file_system'] as const) {
    mp.setSharingStrategy(strategy);
    try {
      assert.throws(() => mp.empty([2 ** 42], { shared: true, dtype: 'uint8' }), isCoded(mp.ShmFullError, 'ERR_TP_SHM_FULL'));
    } finally {
      mp.setSharingStrategy('file_descriptor');
    }
  }
});

const NOFILE = 256;

test('a low open-file limit is ERR_TP_TOO_MANY_FILES, and the process goes on', async () => {
  // Not much lower: Node's ESM loader reads the library's ~200 modules with many files open at
  // once, and at 64 the peer died of EMFILE while loading, before the test began.
  const peer = startPeer(peerScript, [], { wrap: ['prlimit', `--nofile=${NOFILE}:${NOFILE}`] });
  try {
    // Each live memfd segment of this process keeps its descriptor (it may still be sent).
    // 1 KiB each, above PACK_BYTES: a segment, and a descriptor, each (NOTE [Packed small storages]).
    peer.send({ cmd: 'allocMany', strategy: 'file_descriptor', elements: 256, max: 1000 });
    const r = await peer.next();
    assert.ok(r.count > 0 && r.count < NOFILE, JSON.stringify(r));
    assert.deepEqual([r.error.name, r.error.code], ['TooManyFilesError', 'ERR_TP_TOO_MANY_FILES']);
    assert.match(r.error.message, /ulimit -n/);
    // everything was released: the same allocations work again
    peer.send({ cmd: 'allocMany', strategy: 'file_descriptor', elements: 256, max: r.count });
    assert.deepEqual(await peer.next(), { count: r.count });
    peer.send({ cmd: 'exit' });
    assert.equal((await peer.exited).code, 0);
  } finally {
    peer.child.kill('SIGKILL');
  }
});

// Issue 10, item 2: memory given back must not stay resident. A segment given up was unmapped
// only when the collector freed its header's buffer, and the list of segments ever leased kept
// that alive: 100 cycles of 16 MiB with the cache off left 1,600 MiB mapped and resident.
for (const strategy of ['file_descriptor', 'file_system'] as const) {
  test(`${strategy}: 100 allocate-and-release cycles of 16 MiB with the cache off leave at most one segment resident`, async (t) => {
    const peer = startPeer(peerScript, [], { env: { ...process.env, TENSORPROC_CACHE_BYTES: '0' } });
    try {
      // Every other tensor's data is seen by user code (t.data), whose buffer release() detaches.
      peer.send({ cmd: 'cycles', strategy, n: 100, elements: 4 << 20, escape: true });
      const r = await peer.next();
      t.diagnostic(`after 100 cycles: ${r.segments} segment(s) mapped, ${r.mapped} bytes mapped, ${r.resident} resident`);
      assert.ok(r.resident <= (16 << 20) + 4096 && r.mapped <= (16 << 20) + 4096, JSON.stringify(r));
      peer.send({ cmd: 'ls' });
      assert.deepEqual(
        (await peer.next()).shm.filter((n: string) => n.startsWith('tensorproc_')),
        [],
        'no name left',
      );
      peer.send({ cmd: 'exit' });
      assert.equal((await peer.exited).code, 0);
    } finally {
      peer.child.kill('SIGKILL');
    }
  });
}

test('a full /dev/shm is usable again once its tensors are released and the cache emptied (no collection needed)', {
  skip: !canUnshare && 'needs unshare -m (root)',
}, async () => {
  const peer = startPeer(peerScript, [], { wrap: smallShm(64 << 10) });
  try {
    peer.send({ cmd: 'fillTwice', strategy: 'file_system', elements: 1 << 20, max: 100 }); // 4 MiB each
    const r = await peer.next();
    assert.ok(r.counts[0] >= 10, JSON.stringify(r));
    assert.equal(r.counts[1], r.counts[0], 'the second round fits as many');
    assert.deepEqual([r.segments, r.mapped], [0, 0], 'nothing mapped after emptyCache()');
    peer.send({ cmd: 'exit' });
    assert.equal((await peer.exited).code, 0);
  } finally {
    peer.child.kill('SIGKILL');
  }
});
