// Children die with their parent (NOTE [No orphans] in process/process-handle.ts),
// daemon children do not keep it alive, and a parent under tsx starts .ts targets.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { running } from '../helpers/procs.js';
import { checkLeaks } from '../helpers/leaks.js';
import { addon } from '../../src/native/index.js';
import { fixture, startPeer, type Peer } from '../helpers/child.js';

checkLeaks();

let root: string;
before(() => (root = mkdtempSync(join(tmpdir(), 'tensorproc-orphans-test-'))));
after(() => rmSync(root, { recursive: true, force: true }));

/**
 * Resolves once `pid` has exited (or was already gone). A process closes its descriptors a
 * moment before it becomes a zombie, so a closed pipe alone does not prove its holders are
 * dead: wait on a pidfd, which the kernel makes readable at the exit itself.
 */
function exited(pid: number): Promise<void> {
  let fd: number;
  try {
    fd = addon.pidfdOpen(pid);
  } catch {
    return Promise.resolve(); // ESRCH: gone already
  }
  return new Promise((resolve) => {
    const poll = new addon.Poll(fd, () => {
      poll.close();
      addon.close(fd);
      resolve();
    });
    poll.start(1);
  });
}

/** Resolves once every process holding the peer's stdout has closed it: the peer and the children it gave its stdout to. */
function outputClosed(peer: Peer): Promise<void> {
  return new Promise((resolve) => peer.child.stdout!.once('close', () => resolve()));
}

async function parentWithChildren(
  mode: 'orphan' | 'daemon',
  how: 'spawn' | 'Process',
): Promise<{ peer: Peer; pids: number[]; closed: Promise<void> }> {
  const dir = mkdtempSync(join(root, `${mode}-`));
  const peer = startPeer(fixture(import.meta.url, 'orphan-parent.js'), [mode, dir, how]);
  const closed = outputClosed(peer);
  const { pids } = (await peer.next()) as { pids: number[] };
  return { peer, pids, closed };
}

for (const how of ['spawn', 'Process'] as const)
  describe(`no orphans (${how})`, () => {
    it('children die when their parent is killed with SIGKILL', { timeout: 60_000 }, async () => {
      const { peer, pids, closed } = await parentWithChildren('orphan', how);
      try {
        assert.equal(pids.length, 2);
        assert.ok(pids.every(running), 'the children run before the parent dies');
        peer.child.kill('SIGKILL');
        assert.equal((await peer.exited).signal, 'SIGKILL');
        await closed; // the children held the same stdout: they are exiting too
        await Promise.all(pids.map(exited));
        assert.deepEqual(pids.filter(running), []);
      } finally {
        for (const pid of pids) if (running(pid)) process.kill(pid, 'SIGKILL');
      }
    });

    it('daemon children do not keep the parent alive, and die with it', { timeout: 60_000 }, async () => {
      const { peer, pids, closed } = await parentWithChildren('daemon', how);
      try {
        assert.deepEqual(await peer.exited, { code: 0, signal: null });
        await closed;
        await Promise.all(pids.map(exited));
        assert.deepEqual(pids.filter(running), []);
      } finally {
        for (const pid of pids) if (running(pid)) process.kill(pid, 'SIGKILL');
      }
    });
  });

describe('loaders', () => {
  it('a parent under `node --import tsx` runs a .ts target, in processes and threads', { timeout: 60_000 }, () => {
    const repo = fileURLToPath(new URL('../../../', import.meta.url));
    const dir = mkdtempSync(join(root, 'tsx-'));
    const r = spawnSync(process.execPath, ['--import', 'tsx', 'test/process/fixtures/tsx-parent.ts', dir], {
      cwd: repo,
      encoding: 'utf8',
      timeout: 50_000,
      killSignal: 'SIGKILL', // its children die with it (see above)
    });
    assert.equal(r.status, 0, r.stderr);
    assert.deepEqual(JSON.parse(r.stdout.trim().split('\n').pop()!), { ok: true });
    assert.deepEqual(readdirSync(dir).sort(), ['spawn-0', 'spawn-1', 'thread-0', 'thread-1']);
  });
});
