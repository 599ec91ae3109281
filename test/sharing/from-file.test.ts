// mp.fromFile: a file's pages as a tensor. Values, read-only enforcement (methods throw, a raw
// write never reaches the file), writable mappings, every error by class and code, a file
// truncated under its mapping (a coded error, never SIGBUS: NOTE [File mappings and SIGBUS]),
// travel to another process under both strategies, and 4 DataLoader workers over a 1 GiB
// file sharing one copy of it in the page cache.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  mkdtempSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
  truncateSync,
  openSync,
  closeSync,
  ftruncateSync,
  writeSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as mp from '../../src/index.js';
import { checkLeaks } from '../helpers/leaks.js';
import { throwsCoded } from '../helpers/errors.js';

checkLeaks();

const dir = mkdtempSync(join(tmpdir(), 'tp-fromfile-'));
process.on('exit', () => rmSync(dir, { recursive: true, force: true }));
const targets = new URL('./fixtures/file-targets.js', import.meta.url);

function int32File(name: string, n: number): string {
  const p = join(dir, name);
  writeFileSync(
    p,
    Int32Array.from({ length: n }, (_, i) => i * 10),
  );
  return p;
}

test('values, shape and offset; read-only: methods throw, a raw write stays private; writable writes the file', () => {
  const p = int32File('values.bin', 1024);
  const all = mp.fromFile(p, { dtype: 'int32' });
  assert.deepEqual(all.shape, [1024]);
  assert.equal(all.get(1023), 10230);
  assert.ok(all.isShared());
  const part = mp.fromFile(p, { dtype: 'int32', offset: 8, shape: [2, 3] });
  assert.deepEqual(part.toArray(), [
    [20, 30, 40],
    [50, 60, 70],
  ]);
  const before = readFileSync(p);
  throwsCoded(() => all.set([0], 1), mp.ReadOnlyError, 'ERR_TP_READ_ONLY');
  throwsCoded(() => all.fill(1), mp.ReadOnlyError, 'ERR_TP_READ_ONLY');
  throwsCoded(() => part.select(0, 1).copy(mp.zeros([3], { dtype: 'int32' })), mp.ReadOnlyError, 'ERR_TP_READ_ONLY');
  (all.data as Int32Array).fill(-7); // no crash: copy-on-write pages of this process
  assert.equal(all.get(5), -7, 'this process sees its own raw write');
  assert.deepEqual(readFileSync(p), before, 'the file is unchanged');
  assert.equal(part.get(0, 0), 20, 'another mapping of the file does not see it');
  const rw = mp.fromFile(p, { dtype: 'int32', writable: true, offset: 4, shape: [1] });
  rw.set([0], 12345);
  assert.equal(new Int32Array(readFileSync(p).buffer.slice(4, 8))[0], 12345, 'a writable mapping writes the file');
  assert.ok(part.clone().toArray() !== null);
  for (const t of [all, part, rw]) t.release();
});

test('bad paths, dtypes, offsets and shapes are coded errors', () => {
  const p = int32File('small.bin', 4); // 16 bytes
  throwsCoded(() => mp.fromFile(join(dir, 'missing.bin'), { dtype: 'uint8' }), mp.FileOpenError, 'ERR_TP_FILE_OPEN');
  assert.equal(throwsCoded(() => mp.fromFile(dir, { dtype: 'uint8' }), mp.FileOpenError, 'ERR_TP_FILE_OPEN').errnoName, 'EISDIR');
  throwsCoded(() => mp.fromFile('/dev/null', { dtype: 'uint8' }), mp.FileOpenError, 'ERR_TP_FILE_OPEN');
  throwsCoded(() => mp.fromFile(p, { dtype: 'float128' as mp.DType }), mp.InvalidDtypeError, 'ERR_TP_INVALID_DTYPE');
  throwsCoded(() => mp.fromFile(p, { dtype: 'int32', offset: 2 }), mp.FileSizeError, 'ERR_TP_FILE_SIZE');
  throwsCoded(() => mp.fromFile(p, { dtype: 'int32', offset: 20 }), mp.FileSizeError, 'ERR_TP_FILE_SIZE');
  throwsCoded(() => mp.fromFile(p, { dtype: 'int32', shape: [5] }), mp.FileSizeError, 'ERR_TP_FILE_SIZE');
  throwsCoded(() => mp.fromFile(p, { dtype: 'float64', offset: 8, shape: [2] }), mp.FileSizeError, 'ERR_TP_FILE_SIZE');
  throwsCoded(() => mp.fromFile(p, { dtype: 'int32', shape: [-1] }), mp.InvalidShapeError, 'ERR_TP_INVALID_SHAPE');
  throwsCoded(() => mp.fromFile(p, { dtype: 'int32', offset: -4 }), mp.InvalidArgumentError, 'ERR_TP_INVALID_ARGUMENT');
  throwsCoded(() => mp.fromFile(p, undefined as never), mp.InvalidArgumentError, 'ERR_TP_INVALID_ARGUMENT');
  writeFileSync(join(dir, 'odd.bin'), Buffer.alloc(7));
  throwsCoded(() => mp.fromFile(join(dir, 'odd.bin'), { dtype: 'int32' }), mp.FileSizeError, 'ERR_TP_FILE_SIZE');
  assert.deepEqual(mp.fromFile(join(dir, 'odd.bin'), { dtype: 'int32', offset: 4, shape: [0] }).shape, [0]);
});

test('a file truncated under its mapping: ERR_TP_FILE_TRUNCATED from methods, zeros through t.data, no SIGBUS', () => {
  const p = int32File('shrinks.bin', 65536); // 256 KiB
  const ro = mp.fromFile(p, { dtype: 'int32' });
  const rw = mp.fromFile(p, { dtype: 'int32', writable: true, offset: 4096 });
  const raw = ro.data as Int32Array;
  assert.equal(raw[60000], 600000);
  truncateSync(p, 100);
  assert.equal(raw[60000], 0, 'the page past the end reads zero instead of killing the process');
  throwsCoded(() => ro.get(0), mp.FileTruncatedError, 'ERR_TP_FILE_TRUNCATED');
  throwsCoded(() => ro.toArray(), mp.FileTruncatedError, 'ERR_TP_FILE_TRUNCATED');
  (rw.data as Int32Array)[40000] = 5; // a write past the end: no crash either
  throwsCoded(() => rw.get(1), mp.FileTruncatedError, 'ERR_TP_FILE_TRUNCATED');
  throwsCoded(() => rw.data, mp.FileTruncatedError, 'ERR_TP_FILE_TRUNCATED');
  ro.release();
  rw.release();
});

for (const strategy of ['file_descriptor', 'file_system'] as const) {
  test(`${strategy}: a file tensor travels as a handle; read-only holds in the receiver; writable writes reach the sender`, async () => {
    mp.setSharingStrategy(strategy);
    const p = int32File(`travel-${strategy}.bin`, 16384);
    const ro = mp.fromFile(p, { dtype: 'int32', shape: [4] });
    const rw = mp.fromFile(p, { dtype: 'int32', writable: true, offset: 4096, shape: [2] });
    const q = new mp.Queue();
    const inbox = new mp.Queue();
    try {
      const child = new mp.Process({ target: { module: targets, export: 'check' }, args: [ro, rw, q, inbox] });
      child.start();
      const report = (await q.get()) as Record<string, unknown>;
      assert.deepEqual(report, {
        fileStorage: true,
        ro: [0, 10, 20, 30],
        setCode: 'ERR_TP_READ_ONLY',
        fillCode: 'ERR_TP_READ_ONLY',
        afterRawWrite: -1,
      });
      assert.equal(ro.get(1), 10, "the child's raw write did not reach us");
      assert.equal(new Int32Array(readFileSync(p).buffer, 4, 1)[0], 10, 'nor the file');
      assert.equal(rw.get(0), 42, "the child's write through a writable mapping is ours too");
      // The path now names another file: file_system receivers open the path and refuse it;
      // under file_descriptor the descriptor is the mapped file itself.
      const other = join(dir, `other-${strategy}.bin`);
      writeFileSync(other, Int32Array.from([7, 7, 7, 7]));
      const next = mp.fromFile(p, { dtype: 'int32', offset: 16, shape: [2] });
      renameSync(other, p);
      await inbox.put(next);
      const answer = ((await q.get()) as { next: unknown }).next;
      assert.deepEqual(answer, strategy === 'file_system' ? 'ERR_TP_FILE_CHANGED' : [40, 50]);
      await child.join();
      assert.equal(child.exitCode, 0);
      next.release();
    } finally {
      q.close();
      inbox.close();
      ro.release();
      rw.release();
      mp.setSharingStrategy('file_descriptor');
    }
  });
}

/** Rss and Pss (bytes) of `pid`'s mappings of `path`, from /proc/<pid>/smaps. */
function mappedMemory(pid: number, path: string): { rss: number; pss: number; anon: number } {
  let rss = 0,
    pss = 0,
    anon = 0,
    inFile = false;
  for (const line of readFileSync(`/proc/${pid}/smaps`, 'latin1').split('\n')) {
    if (/^[0-9a-f]+-[0-9a-f]+ /.test(line)) inFile = line.endsWith(` ${path}`);
    else if (line.startsWith('Anonymous:')) anon += Number(line.split(/\s+/)[1]) * 1024;
    else if (inFile && line.startsWith('Rss:')) rss += Number(line.split(/\s+/)[1]) * 1024;
    else if (inFile && line.startsWith('Pss:')) pss += Number(line.split(/\s+/)[1]) * 1024;
  }
  return { rss, pss, anon };
}

test('4 DataLoader workers reading a 1 GiB file share one copy of it (page cache), not four', async () => {
  const GiB = 2 ** 30;
  const p = join(dir, 'dataset.bin');
  // Sparse, but for a byte set in every 64 KiB: the reads fault in page cache pages either way.
  const fd = openSync(p, 'w');
  ftruncateSync(fd, GiB);
  const one = Buffer.from([1]);
  for (let at = 0; at < GiB; at += 65536) writeSync(fd, one, 0, 1, at);
  closeSync(fd);
  const t = mp.fromFile(p, { dtype: 'uint8' });
  const loader = new mp.DataLoader(
    { module: targets, export: 'pages', args: [t, 4] },
    { batchSize: null, numWorkers: 4, persistentWorkers: true },
  );
  try {
    // Until every worker has read the file (each reads it whole on its first sample).
    const seen = new Set<number>();
    for (let epoch = 0; seen.size < 4; epoch++) {
      assert.ok(epoch < 200, 'every worker gets samples');
      for await (const [pid, sum] of loader as AsyncIterable<[number, number]>) {
        assert.equal(sum, GiB / 65536);
        seen.add(pid);
      }
    }
    const pids = loader.workerPids;
    assert.deepEqual(new Set(pids), seen);
    const mem = pids.map((pid) => mappedMemory(pid, p));
    for (const m of mem) {
      assert.ok(m.rss >= 0.99 * GiB, `each worker maps the whole file: ${m.rss} bytes resident`);
      assert.ok(m.anon < GiB / 4, `and holds no copy of it: ${m.anon} bytes anonymous`);
    }
    const pss = mem.reduce((s, m) => s + m.pss, 0);
    assert.ok(pss <= 1.05 * GiB, `4 workers together account for one copy: ${pss} bytes`);
  } finally {
    await loader.close();
    t.release();
    rmSync(p);
  }
});
