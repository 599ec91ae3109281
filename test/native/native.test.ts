// The addon's primitives, one by one, with real memory, descriptors and processes.
import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import { cpSync, ftruncateSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { isTensorprocError, BadHandleError, SegmentGoneError, TensorprocSystemError } from '../../src/index.js';
import { addon, systemError } from '../../src/native/index.js';
import { Segment, HEADER_BYTES } from '../../src/sharing/index.js';
import { checkLeaks, collectGarbage } from '../helpers/leaks.js';
import { isCoded } from '../helpers/errors.js';
import { startPeer, fixture } from '../helpers/child.js';

checkLeaks();
const peerScript = fixture(new URL('../sharing/', import.meta.url), 'peer.js');
const orphanScript = fixture(import.meta.url, 'futex-orphan.js');

describe('segments', () => {
  test('memfd: sized, reserved, sealed against resizing', () => {
    const fd = addon.memfdCreate('tensorproc-test', 8192);
    try {
      assert.equal(addon.fstat(fd)[0], 8192);
      assert.throws(
        () => ftruncateSync(fd, 100),
        (e: any) => e.code === 'EPERM',
        'shrinking is sealed',
      );
      assert.throws(
        () => ftruncateSync(fd, 1 << 20),
        (e: any) => e.code === 'EPERM',
        'growing is sealed',
      );
    } finally {
      addon.close(fd);
    }
  });

  test('shm_open: exclusive, 0600, removed again on failure', () => {
    const name = `/tensorproc_${process.pid}_test${Date.now()}`;
    const fd = addon.shmCreate(name, 4096);
    try {
      assert.ok(readdirSync('/dev/shm').includes(name.slice(1)));
      assert.throws(
        () => addon.shmCreate(name, 4096),
        (e: any) => e.code === 'EEXIST' && e.syscall === 'shm_open' && e.errno === -17,
      );
      const fd2 = addon.shmOpen(name);
      addon.close(fd2);
    } finally {
      addon.close(fd);
      addon.shmUnlink(name);
    }
    assert.throws(
      () => addon.shmOpen(name),
      (e: any) => e.code === 'ENOENT',
    );
    const err = systemError(
      (() => {
        try {
          addon.shmOpen(name);
        } catch (e) {
          return e;
        }
      })(),
      'opening',
    );
    isCoded(SegmentGoneError, 'ERR_TP_SEGMENT_GONE')(err);
  });

  test('a handle claiming more bytes than its segment holds is ERR_TP_BAD_HANDLE', () => {
    const fd = addon.memfdCreate('tensorproc-test', 4096);
    assert.throws(() => Segment.openFd(fd, 4096), isCoded(BadHandleError, 'ERR_TP_BAD_HANDLE'));
    // openFd took the descriptor and closed it on failure (the leak check sees it)
    const raw = addon.memfdCreate('tensorproc-test', HEADER_BYTES + 4096);
    assert.throws(
      () => Segment.openFd(raw, 100),
      (e: any) => isCoded(BadHandleError, 'ERR_TP_BAD_HANDLE')(e) && /header/.test(e.message),
      'a memfd without our header is refused',
    );
    assert.throws(() => Segment.openName('/etc/passwd', 1), isCoded(BadHandleError, 'ERR_TP_BAD_HANDLE'));
    assert.throws(() => Segment.openName('/tensorproc_0_gone', 1), isCoded(SegmentGoneError, 'ERR_TP_SEGMENT_GONE'));
  });
});

describe('mappings', () => {
  test('ArrayBuffer and SharedArrayBuffer over one mapping; unmapped after the last view', async () => {
    const [maps0] = addon.mappingStats();
    const fd = addon.memfdCreate('tensorproc-test', 4096);
    let m = addon.map(fd, 4096);
    addon.close(fd); // a mapping outlives its descriptor
    let ab: ArrayBuffer | null = addon.buffer(m, 64, 128);
    const sab = addon.sharedBuffer(m, 0, 4096);
    new Float64Array(ab)[1] = 42;
    assert.equal(new Float64Array(sab, 64)[1], 42);
    assert.ok(sab instanceof SharedArrayBuffer);
    assert.throws(() => addon.buffer(m, 4000, 200), RangeError);
    addon.detach(ab);
    assert.equal(ab.byteLength, 0);
    addon.unmap(m);
    assert.equal(addon.mappingStats()[0], maps0 + 1);
    ab = null;
    m = null as any;
    // the SharedArrayBuffer still holds the mapping
    assert.equal(new Float64Array(sab, 64)[1], 42);
    await collectGarbage();
    void sab;
  });

  test('the memory is unmapped once every buffer is collected', async () => {
    const [, unmaps0] = addon.mappingStats();
    (() => {
      const fd = addon.memfdCreate('tensorproc-test', 4096);
      const m = addon.map(fd, 4096);
      addon.close(fd);
      addon.buffer(m, 0, 10);
      addon.sharedBuffer(m, 0, 10);
      addon.unmap(m);
    })();
    for (let i = 0; i < 20 && addon.mappingStats()[1] === unmaps0; i++) await collectGarbage();
    assert.ok(addon.mappingStats()[1] > unmaps0);
  });
});

describe('futex across processes', () => {
  for (const kind of ['futexWait', 'futexWaitAsync'] as const) {
    test(`${kind} in one process is woken by futexWake in another`, async () => {
      const seg = Segment.create('file_descriptor', 64);
      const peer = startPeer(peerScript, [], { fds: [seg.fd!] });
      try {
        peer.send({ cmd: 'mapFd', nbytes: 64 });
        assert.deepEqual(await peer.next(), { ok: true });
        const word = HEADER_BYTES; // first data word, 0
        peer.send({ cmd: kind, offset: word, expected: 0, timeout: -1 });
        assert.deepEqual(await peer.next(), { waiting: true });
        // The peer may not be inside futex() yet: change the word first, so that a late
        // waiter sees 'not-equal' instead of sleeping; then wake.
        const view = new Int32Array(addon.sharedBuffer(seg.mapping, word, 4));
        Atomics.store(view, 0, 1);
        addon.futexWake(seg.mapping, word, 1);
        const r: any = await peer.next();
        assert.ok(r.result === 'ok' || r.result === 'not-equal', JSON.stringify(r));
        peer.send({ cmd: kind, offset: word, expected: 1, timeout: 1 });
        await peer.next();
        assert.deepEqual(await peer.next(), { result: 'timed-out' });
        peer.send({ cmd: 'exit' });
        await peer.exited;
      } finally {
        seg.drop();
      }
    });
  }

  test('a wait pending when its worker thread exits ends later without crashing the process', async () => {
    const peer = startPeer(orphanScript, ['10']);
    const out = await peer.next();
    assert.deepEqual(out, { survived: 11 });
    assert.deepEqual(await peer.exited, { code: 0, signal: null });
  });

  test('an infinite or huge timeout means no timeout, not EINVAL', async () => {
    const seg = Segment.create('file_descriptor', 64);
    try {
      const word = HEADER_BYTES;
      for (const timeout of [Infinity, 1e300]) {
        const waiting = addon.futexWaitAsync(seg.mapping, word, 0, timeout);
        // Wake until the waiter has gone into futex() and come out again.
        let result: string | undefined;
        void waiting.then(
          (r) => (result = r),
          (e) => (result = `threw ${e.code}`),
        );
        while (result === undefined) {
          addon.futexWake(seg.mapping, word, 1);
          await new Promise((r) => setTimeout(r, 5));
        }
        assert.equal(result, 'ok', `timeout ${timeout}`);
      }
    } finally {
      seg.drop();
    }
  });

  test('bad futex offsets are refused, not crashes', () => {
    const seg = Segment.create('file_descriptor', 64);
    try {
      assert.throws(() => addon.futexWake(seg.mapping, 2, 1), RangeError);
      assert.throws(() => addon.futexWake(seg.mapping, 1 << 20, 1), RangeError);
      assert.throws(() => addon.buffer(seg.mapping, 2 ** 62, 2 ** 62), RangeError);
    } finally {
      seg.drop();
    }
  });
});

describe('channels', () => {
  test('SEQPACKET socketpair carries bytes and descriptors, non-blocking', () => {
    const [a, b] = addon.socketpair();
    const memfd = addon.memfdCreate('tensorproc-test', 4096);
    try {
      assert.equal(addon.send(a, new TextEncoder().encode('hello'), new Int32Array([memfd])), 5);
      const buf = new Uint8Array(64);
      const fds = new Int32Array(8);
      assert.equal(addon.recv(b, buf, fds), 5);
      assert.equal(new TextDecoder().decode(buf.subarray(0, 5)), 'hello');
      assert.equal(fds[0], 1);
      assert.equal(addon.fstat(fds[1]!)[2], addon.fstat(memfd)[2], 'the same memfd arrived');
      addon.close(fds[1]!);
      assert.equal(addon.recv(b, buf, fds), -11, 'EAGAIN when nothing waits');
      // a datagram larger than the buffer is an error and loses no descriptor
      addon.send(a, new Uint8Array(100), new Int32Array([memfd]));
      assert.throws(
        () => addon.recv(b, new Uint8Array(10), fds),
        (e: any) => e.code === 'EMSGSIZE',
      );
      // fill the socket buffer: send reports EAGAIN instead of blocking
      let r = 0;
      for (let i = 0; i < 100000 && r !== -11; i++) r = addon.send(a, new Uint8Array(4096));
      assert.equal(r, -11);
    } finally {
      addon.close(memfd);
      addon.close(a);
      addon.close(b);
    }
  });

  test('descriptor arrays other than Int32Array are refused, not written past their end', () => {
    const [a, b] = addon.socketpair();
    const memfd = addon.memfdCreate('tensorproc-test', 4096);
    try {
      assert.throws(() => addon.send(a, new Uint8Array(1), new Uint8Array([memfd]) as unknown as Int32Array), TypeError);
      assert.equal(addon.send(a, new Uint8Array(1), new Int32Array([memfd, memfd, memfd])), 1);
      // three descriptors would be 16 bytes of int32 into a 4-byte array
      assert.throws(() => addon.recv(b, new Uint8Array(8), new Uint8Array(4) as unknown as Int32Array), TypeError);
    } finally {
      addon.close(memfd);
      addon.close(a);
      addon.close(b);
    }
  });

  test('end of stream once the peer closes', () => {
    const [a, b] = addon.socketpair();
    addon.close(a);
    assert.equal(addon.recv(b, new Uint8Array(8), new Int32Array(4)), -1);
    assert.throws(
      () => addon.send(b, new Uint8Array(1)),
      (e: any) => e.code === 'EPIPE',
    );
    addon.close(b);
  });

  test('Poll reports readability from the event loop', async () => {
    const [a, b] = addon.socketpair();
    try {
      const got = await new Promise<number>((resolve) => {
        const poll = new addon.Poll(b, (_status, events) => {
          poll.close();
          resolve(events);
        });
        poll.start(1);
        addon.send(a, new Uint8Array([1]));
      });
      assert.equal(got & 1, 1);
    } finally {
      addon.close(a);
      addon.close(b);
    }
  });
});

describe('errors from the system', () => {
  test('an errno without a class of its own is ERR_TP_SYSTEM, carrying errno, syscall and its name', () => {
    const fd = addon.memfdCreate('tensorproc-test', 4096);
    addon.close(fd);
    // closing a closed descriptor: EBADF, which nothing maps to a class of its own
    const raw = (() => {
      try {
        addon.fstat(fd);
      } catch (e) {
        return e;
      }
      return null;
    })();
    const e = systemError(raw, 'looking at a segment') as any;
    isCoded(TensorprocSystemError, 'ERR_TP_SYSTEM')(e);
    assert.equal(e.constructor, TensorprocSystemError, 'not one of its subclasses');
    assert.equal(e.errnoName, 'EBADF');
    assert.equal(e.errno, -9);
    assert.equal(e.syscall, 'fstat');
    assert.match(e.message, /^looking at a segment: fstat failed with EBADF/);
    assert.ok(isTensorprocError(e));
  });

  test('a package whose addon was not built says how to build it (ERR_TP_ADDON_MISSING)', () => {
    // A copy of the compiled JavaScript with no build/ beside it.
    const root = mkdtempSync(join(tmpdir(), 'tensorproc-noaddon-'));
    try {
      cpSync(fileURLToPath(new URL('../../src', import.meta.url)), join(root, 'dist', 'src'), { recursive: true });
      writeFileSync(join(root, 'package.json'), '{"type":"module"}');
      const r = spawnSync(
        process.execPath,
        [
          '--input-type=module',
          '-e',
          `import(${JSON.stringify(pathToFileURL(join(root, 'dist', 'src', 'index.js')).href)}).catch((e) => { console.log(JSON.stringify({ name: e.name, code: e.code, message: e.message })); })`,
        ],
        { encoding: 'utf8' },
      );
      const out = JSON.parse(r.stdout);
      assert.equal(out.name, 'AddonError'); // thrown in another process: its class shows as its name
      assert.equal(out.code, 'ERR_TP_ADDON_MISSING');
      assert.match(out.message, /npm ci/);
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });

  test('a package whose addon is broken says so, and how to rebuild it (ERR_TP_ADDON_MISSING)', () => {
    // The compiled JavaScript with a build/Release/tensorproc.node that is not a shared object.
    const root = mkdtempSync(join(tmpdir(), 'tensorproc-badaddon-'));
    try {
      cpSync(fileURLToPath(new URL('../../src', import.meta.url)), join(root, 'dist', 'src'), { recursive: true });
      writeFileSync(join(root, 'package.json'), '{"type":"module"}');
      mkdirSync(join(root, 'build', 'Release'), { recursive: true });
      writeFileSync(join(root, 'build', 'Release', 'tensorproc.node'), 'console.log("ran as a script")\n');
      const env = { ...process.env };
      delete env.TENSORPROC_ADDON;
      const r = spawnSync(
        process.execPath,
        [
          '--input-type=module',
          '-e',
          `import(${JSON.stringify(pathToFileURL(join(root, 'dist', 'src', 'index.js')).href)}).catch((e) => { console.log(JSON.stringify({ name: e.name, code: e.code, message: e.message })); })`,
        ],
        { encoding: 'utf8', env },
      );
      assert.doesNotMatch(r.stdout, /ran as a script/, 'the file is opened as a shared object, never run');
      const out = JSON.parse(r.stdout);
      assert.equal(out.name, 'AddonError'); // thrown in another process: its class shows as its name
      assert.equal(out.code, 'ERR_TP_ADDON_MISSING');
      assert.match(out.message, /does not load/);
      assert.match(out.message, /npm rebuild tensorproc/);
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });
});
