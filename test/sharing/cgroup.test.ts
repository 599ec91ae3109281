// A memory cgroup's limit is ERR_TP_SHM_FULL, not the OOM killer, under cgroup v1 as under v2
// (NOTE [Cgroup memory room], src/sharing/cgroup.ts): in a real v1 memory cgroup where the
// machine has one and lets us make one, and from fixture files for both versions, both
// layouts (the host's view and a container's subtree) everywhere.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, rmdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { checkLeaks } from '../helpers/leaks.js';
import { startPeer, fixture } from '../helpers/child.js';
import { cgroupRoom, memoryCgroups } from '../../src/sharing/cgroup.js';

const peerScript = fixture(import.meta.url, 'peer.js');
const MiB = 2 ** 20;

/** A v1 memory hierarchy mounted read-write, where a child cgroup can be made (root, a VM or a privileged container). */
function v1Memory(): string | null {
  const mount = readFileSync('/proc/self/mountinfo', 'latin1')
    .split('\n')
    .map((l) => l.split(' '))
    .find((f) => f[f.indexOf('-') + 1] === 'cgroup' && (f[f.indexOf('-') + 3] ?? '').split(',').includes('memory'));
  if (mount === undefined) return null;
  const dir = join(mount[4]!, `tensorproc-test-${process.pid}`);
  try {
    mkdirSync(dir);
    writeFileSync(join(dir, 'memory.limit_in_bytes'), String(256 * MiB));
    return dir;
  } catch {
    rmSync(dir, { recursive: false, force: true });
    return null;
  }
}

const v1 = v1Memory();
// Before the leak check's hook, so that the cgroup goes even when that one fails.
// A file_system manager that a peer started there (a daemon that other processes may be
// using) was born in the cgroup and outlives the peer, and a cgroup with a process in it
// cannot be removed (EBUSY): such processes are moved up to the hierarchy's root, not killed.
after(() => {
  if (v1 === null) return;
  for (const pid of readFileSync(join(v1, 'cgroup.procs'), 'latin1').split('\n').filter(Boolean)) {
    try {
      writeFileSync(join(v1, '..', 'cgroup.procs'), pid);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'ESRCH') throw e; // exited meanwhile
    }
  }
  rmdirSync(v1);
});
checkLeaks();

for (const strategy of ['file_descriptor', 'file_system'] as const) {
  test(`${strategy}: in a 256 MiB cgroup v1, allocating past the limit is ERR_TP_SHM_FULL and the process lives`, {
    skip: v1 === null && 'no writable cgroup v1 memory hierarchy',
  }, async () => {
    // The peer puts itself into the cgroup before node starts, so that all it charges counts.
    const peer = startPeer(peerScript, [], { wrap: ['sh', '-c', `echo $$ > ${v1}/cgroup.procs && exec "$@"`, 'sh'] });
    try {
      peer.send({ cmd: 'allocMany', strategy, elements: (32 * MiB) / 4, max: 16 }); // 512 MiB in 32 MiB tensors
      const r = await peer.next();
      assert.ok(r !== null, 'the peer was killed (the OOM killer) instead of getting an error');
      assert.ok(r.count >= 1 && r.count < 8, JSON.stringify(r));
      assert.deepEqual([r.error.name, r.error.code], ['ShmFullError', 'ERR_TP_SHM_FULL']);
      assert.match(r.error.message, /memory/);
      // What it released is room again.
      peer.send({ cmd: 'allocMany', strategy, elements: (32 * MiB) / 4, max: r.count });
      assert.deepEqual(await peer.next(), { count: r.count });
      peer.send({ cmd: 'exit' });
      assert.deepEqual(await peer.exited, { code: 0, signal: null });
    } finally {
      peer.child.kill('SIGKILL');
      await peer.exited;
    }
  });
}

/** Writes `files` (path -> content) under a fresh directory; returns it. */
function tree(files: Record<string, string>): string {
  const root = mkdtempSync(join(tmpdir(), 'tp-cgroup-'));
  for (const [path, content] of Object.entries(files)) {
    mkdirSync(join(root, path, '..'), { recursive: true });
    writeFileSync(join(root, path), content);
  }
  return root;
}

const mountLine = (id: number, root: string, point: string, type: string, opts: string): string =>
  `${id} 25 0:${id} ${root} ${point} rw,nosuid,nodev,noexec,relatime shared:${id} - ${type} ${type} ${opts}`;

test('cgroup v1 from fixture files: the own cgroup and its ancestors, the tightest limit, page cache as room', () => {
  const unlimited = '9223372036854771712\n';
  const root = tree({
    'memory/memory.limit_in_bytes': unlimited,
    'memory/memory.usage_in_bytes': String(5000 * MiB),
    'memory/ci/memory.limit_in_bytes': String(1024 * MiB),
    'memory/ci/memory.usage_in_bytes': String(900 * MiB),
    'memory/ci/memory.stat': `cache 0\ntotal_inactive_file ${50 * MiB}\n`,
    'memory/ci/job 1/memory.limit_in_bytes': String(512 * MiB),
    'memory/ci/job 1/memory.usage_in_bytes': String(100 * MiB),
  });
  try {
    writeFileSync(join(root, 'cgroup'), '12:pids:/ci/job 1\n4:memory:/ci/job 1\n0::/\n');
    const point = join(root, 'memory').replaceAll(' ', '\\040');
    writeFileSync(
      join(root, 'mountinfo'),
      [mountLine(30, '/', join(root, 'cpu'), 'cgroup', 'rw,cpu'), mountLine(31, '/', point, 'cgroup', 'rw,memory')].join('\n'),
    );
    const cgroups = memoryCgroups({ procCgroup: join(root, 'cgroup'), mountinfo: join(root, 'mountinfo') });
    assert.deepEqual(cgroups, [
      { version: 1, dir: join(root, 'memory/ci/job 1') },
      { version: 1, dir: join(root, 'memory/ci') },
      { version: 1, dir: join(root, 'memory') },
    ]);
    // job 1 has 412 MiB left, but its parent only 124 MiB.
    assert.equal(cgroupRoom(cgroups), 124 * MiB);
    // Asking for more than that counts its inactive page cache as room (the kernel drops it first).
    assert.equal(cgroupRoom(cgroups, 200 * MiB), 174 * MiB);
  } finally {
    rmSync(root, { recursive: true });
  }
});

test("cgroup v2 from fixture files: a container's subtree mount, 'max', and no cgroup at all", () => {
  const root = tree({
    'unified/memory.max': 'max\n',
    'unified/memory.current': String(300 * MiB),
    'unified/memory.stat': `anon 0\ninactive_file ${10 * MiB}\n`,
  });
  try {
    // The container sees its own cgroup (/docker/abc on the host) mounted at the point.
    writeFileSync(join(root, 'cgroup'), '0::/docker/abc\n');
    writeFileSync(join(root, 'mountinfo'), mountLine(40, '/docker/abc', join(root, 'unified'), 'cgroup2', 'rw,nsdelegate'));
    const sources = { procCgroup: join(root, 'cgroup'), mountinfo: join(root, 'mountinfo') };
    assert.deepEqual(memoryCgroups(sources), [{ version: 2, dir: join(root, 'unified') }]);
    assert.equal(cgroupRoom(memoryCgroups(sources)), Infinity, "'max' is no limit");
    writeFileSync(join(root, 'unified/memory.max'), String(400 * MiB));
    assert.equal(cgroupRoom(memoryCgroups(sources)), 100 * MiB);
    assert.equal(cgroupRoom(memoryCgroups(sources), 105 * MiB), 110 * MiB);
    // No cgroup files at all: no limit from cgroups.
    assert.deepEqual(memoryCgroups({ procCgroup: join(root, 'none'), mountinfo: join(root, 'none') }), []);
  } finally {
    rmSync(root, { recursive: true });
  }
});
