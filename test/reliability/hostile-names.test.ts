// A file_system message carries only a segment's name, which the receiver opens in /dev/shm:
// a peer can name any file there. Only a regular file of the receiver's own user is a segment
// (found by the fault campaign's garbage kind: a process running as root took a copy of a
// segment owned by uid 65534, counted references in it, and removed it at its release). The
// hostile frames go through a real queue's socket, written by this process as a peer would.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { chownSync, copyFileSync, lstatSync, rmSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import * as mp from '../../src/index.js';
import { addon } from '../../src/native/index.js';
import { encodeMessage } from '../../src/transport/index.js';
import { checkLeaks } from '../helpers/leaks.js';
import { isCoded } from '../helpers/errors.js';

checkLeaks();
mp.setSharingStrategy('file_system');

/** The frame of `t` with its segment name replaced by `name` (never sent as itself: its reference is taken back). */
function frameNaming(t: mp.Tensor, name: string): { bytes: Uint8Array; realName: string } {
  const f = encodeMessage(t);
  const bytes = Uint8Array.from(f.bytes);
  f.abandon();
  const nameAt = 24 + 16 * bytes[3]!;
  const realName = Buffer.from(bytes.subarray(nameAt, nameAt + bytes[5]!)).toString('latin1');
  const nb = Buffer.from(name, 'latin1');
  const out = new Uint8Array(nameAt + nb.length);
  out.set(bytes.subarray(0, nameAt));
  out[5] = nb.length;
  out.set(nb, nameAt);
  return { bytes: out, realName };
}

async function refusedThroughQueue(
  t: mp.Tensor,
  name: string,
  refusal: (e: unknown) => true = isCoded(mp.BadHandleError, 'ERR_TP_BAD_HANDLE'),
): Promise<void> {
  const q = new mp.SimpleQueue<unknown>();
  const own = encodeMessage(q);
  const sendFd = own.fds[0]!;
  own.abandon();
  try {
    assert.ok(addon.send(sendFd, frameNaming(t, name).bytes) > 0);
    await assert.rejects(q.get(), refusal);
    // The queue goes on: the next message arrives.
    await q.put('next');
    assert.equal(await q.get(), 'next');
  } finally {
    q.close();
  }
}

const fakeName = (): string => `/tensorproc_${process.pid}_${randomBytes(8).toString('hex')}`;

test("a name of another user's file holding a copy of a segment is refused, and the file is left alone", {
  skip: process.getuid!() !== 0 && 'needs root (a file of another uid)',
}, async () => {
  using t = mp.full([256], 3, { dtype: 'int32', shared: true });
  const { realName } = frameNaming(t, '/x');
  const name = fakeName();
  const path = `/dev/shm${name}`;
  try {
    copyFileSync(`/dev/shm${realName}`, path); // a valid header, this process's pid in it
    chownSync(path, 65534, 65534);
    const ino = lstatSync(path).ino;
    await refusedThroughQueue(t, name);
    const st = lstatSync(path);
    assert.equal(st.ino, ino, 'the file is still there, the same file');
    assert.equal(st.uid, 65534);
  } finally {
    rmSync(path, { force: true });
  }
});

test('a FIFO, a directory and a NUL-cut name under a segment-like name are refused', async () => {
  using t = mp.full([256], 3, { dtype: 'int32', shared: true });
  const { realName } = frameNaming(t, '/x');
  const fifo = fakeName();
  const dir = fakeName();
  try {
    execFileSync('mkfifo', ['-m', '600', `/dev/shm${fifo}`]);
    execFileSync('mkdir', ['-m', '700', `/dev/shm${dir}`]);
    await refusedThroughQueue(t, fifo);
    await refusedThroughQueue(t, dir, (e: any) => (assert.ok(mp.isTensorprocError(e), String(e)), true)); // EISDIR: a coded system error
    // shm_open would stop at the NUL and open the real segment under another key.
    await refusedThroughQueue(t, `${realName}\0`);
    assert.ok(lstatSync(`/dev/shm${fifo}`).isFIFO());
    assert.ok(lstatSync(`/dev/shm${dir}`).isDirectory());
  } finally {
    rmSync(`/dev/shm${fifo}`, { force: true });
    rmSync(`/dev/shm${dir}`, { force: true, recursive: true });
  }
});
