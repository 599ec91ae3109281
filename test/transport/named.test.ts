// Named objects (NOTE [Named objects] in src/transport/names/claim.ts): programs that did not
// start each other meet through names; names are unique, given up by close(), gone with a
// killed creator, and closed to other users. The programs are plain `node` processes
// (fixtures/named-peer.ts), started with child_process, never by tensorproc.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import * as mp from '../../src/index.js';
import { managerDir } from '../../src/sharing/manager/dir.js';
import { entryPath, namesDir } from '../../src/sharing/manager/names-dir.js';
import { checkLeaks } from '../helpers/leaks.js';
import { isCoded, throwsCoded } from '../helpers/errors.js';
import { fixture, startPeer, type Peer } from '../helpers/child.js';
import { waitFor } from '../helpers/wait.js';

checkLeaks();

// A registry and manager of this file's own (children inherit them): a manager already running
// in the default directory may be another tensorproc's, and its sweeps are what is tested here.
const dir = mkdtempSync('/tmp/tp-named-test-');
process.env.TENSORPROC_MANAGER_DIR = dir;
process.env.TENSORPROC_MANAGER_IDLE_MS = '500';
after(() => rmSync(dir, { recursive: true, force: true }));

const peer = fixture(import.meta.url, 'named-peer.js');
const prefix = `tp-test-${process.pid}`;
/** Entries of names starting with `p` (this file's, by default) left in the registry. */
const ours = (p = prefix): string[] => {
  try {
    return readdirSync(namesDir()).filter((e) => e.startsWith(`${p}-`));
  } catch {
    return [];
  }
};

async function finish(p: Peer): Promise<void> {
  const { code, signal } = await p.exited;
  assert.equal(code, 0, `a peer ended with ${code} (${signal})`);
}

test('two unrelated programs exchange tensors and every named kind, under both strategies', async () => {
  // Four programs at once, two per strategy; each pair meets only through its names.
  const runs = (['file_descriptor', 'file_system'] as const).map(async (strategy) => {
    const p = `${prefix}-${strategy === 'file_system' ? 'fs' : 'fd'}`;
    const creator = startPeer(peer, ['create', p, strategy]);
    const attacher = startPeer(peer, ['attach', p, strategy]); // may start first: attach waits for the names
    assert.deepEqual(await creator.next(), { ready: true });
    assert.deepEqual(await attacher.next(), { ready: true });
    const [c, a] = await Promise.all([creator.next(), attacher.next()]);
    await Promise.all([finish(creator), finish(attacher)]);
    return { strategy, c, a };
  });
  for (const { strategy, c, a } of await Promise.all(runs)) {
    assert.deepEqual(
      a.kinds,
      ['Queue', 'JoinableQueue', 'SimpleQueue', 'Event', 'Connection', 'Lock', 'Semaphore', 'SharedValue', 'SharedArray'],
      strategy,
    );
    assert.equal(c.strategy, strategy);
    assert.equal(a.strategy, strategy);
    assert.equal(a.maxsize, 2, `${strategy}: maxsize travels`);
    assert.equal(c.seen, 1, `${strategy}: the attacher's write is seen by the creator`);
    assert.equal(a.sees, 2, `${strategy}: the creator's write is seen by the attacher`);
    assert.equal(a.answer, 'written');
    assert.deepEqual(c.later, [20, 30], `${strategy}: each message once, in order`);
    assert.equal(c.job, 'job');
    assert.equal(a.joined, true, `${strategy}: JoinableQueue.join() sees the creator's taskDone()`);
    assert.equal(c.set, true);
    assert.equal(c.said, 'hi');
    assert.equal(a.echoed, 'hi!');
    assert.equal(c.v, 200, `${strategy}: 200 increments under the named lock`);
    assert.equal(c.arr, 1.5);
  }
  assert.deepEqual(ours(`${prefix}-fd`), [], 'the creators gave their names up');
  assert.deepEqual(ours(`${prefix}-fs`), [], 'the creators gave their names up');
});

test('names are unique across kinds, checked, and given up by close(); attach waits, then NameNotFoundError', async () => {
  const name = `${prefix}-local`;
  const q = new mp.Queue({ name });
  try {
    for (const make of [
      () => new mp.Event({ name }),
      () => new mp.SimpleQueue({ name }),
      () => mp.Pipe({ name }),
      () => new mp.Lock({ name }),
      () => mp.Value('i', 0, { name }),
    ]) {
      throwsCoded(make, mp.NameTakenError, 'ERR_TP_NAME_TAKEN');
    }
    assert.equal(await mp.attach(name), q, 'a process attaching to its own object gets that object');
  } finally {
    q.close();
  }
  await assert.rejects(mp.attach(name, { timeout: 0 }), isCoded(mp.NameNotFoundError, 'ERR_TP_NAME_NOT_FOUND'));
  await assert.rejects(mp.attach(`${prefix}-never`, { timeout: 20 }), isCoded(mp.NameNotFoundError, 'ERR_TP_NAME_NOT_FOUND'));
  for (const bad of ['', 'a/b', '-x', 'x'.repeat(65), 42]) {
    throwsCoded(() => new mp.Queue({ name: bad as string }), mp.InvalidArgumentError, 'ERR_TP_INVALID_ARGUMENT');
    await assert.rejects(mp.attach(bad as string), isCoded(mp.InvalidArgumentError, 'ERR_TP_INVALID_ARGUMENT'));
  }
  // A value whose initial data is refused gives its name back.
  assert.throws(() => mp.Value('i', 'x' as never, { name }));
  // close() gave the name up: another kind takes it, and an attach made before it appears waits for it.
  const waiting = mp.attach<mp.Semaphore>(name, { timeout: 30_000 });
  const sem = new mp.Semaphore(3, { name });
  try {
    assert.equal(await waiting, sem);
  } finally {
    sem.close();
  }
  assert.deepEqual(ours(name), []);
});

test("a SIGKILLed creator's names are gone within the manager's grace, and can be taken again", async () => {
  const p = `${prefix}-killed`;
  const holder = startPeer(peer, ['hold', p]);
  const ready = await holder.next();
  assert.deepEqual(ready.kinds, ['Queue', 'Event']);
  assert.ok(existsSync(entryPath(namesDir(), `${p}-q`)));
  holder.child.kill('SIGKILL');
  assert.equal((await holder.exited).signal, 'SIGKILL');
  // The manager sweeps when it sees the death (its crash grace is 1 s; 5 s for a loaded machine).
  await waitFor(() => ours(p).length === 0, 5000);
  await assert.rejects(mp.attach(`${p}-q`, { timeout: 0 }), isCoded(mp.NameNotFoundError, 'ERR_TP_NAME_NOT_FOUND'));
  const again = new mp.SimpleQueue({ name: `${p}-q` });
  again.close();
  assert.deepEqual(ours(p), []);
});

test('another user can neither attach, list nor reach our names', async (t) => {
  if (process.getuid!() !== 0 || spawnSync('setpriv', ['--version']).status !== 0) {
    t.skip('needs root (to run a peer as uid 65534) and setpriv');
    return;
  }
  const p = `${prefix}-uid`;
  const q = new mp.Queue({ name: `${p}-q` });
  try {
    const other = startPeer(peer, ['other-uid', p, 'default', managerDir()], {
      wrap: ['setpriv', '--reuid=65534', '--regid=65534', '--clear-groups'],
    });
    const r = await other.next();
    await finish(other);
    assert.equal(r.uid, '65534');
    assert.equal(r.oursAttach, 'ERR_TP_NAME_FORBIDDEN', 'our registry is refused with a coded error');
    assert.equal(r.list, 'EACCES', 'our names cannot be listed');
    assert.equal(r.connect, 'EACCES', 'our sockets cannot be reached');
    assert.equal(r.ownAttach, 'ERR_TP_NAME_NOT_FOUND', 'in its own registry, our name does not exist');
  } finally {
    q.close();
  }
  assert.deepEqual(ours(p), []);
});
