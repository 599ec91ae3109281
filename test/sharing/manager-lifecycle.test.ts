// The file_system manager's life (NOTE [The file_system manager]): started on first use,
// once however many start it together, again after a kill, stopping by itself; refusing
// other users; a coded warning when it cannot run; no traffic per message.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { chmodSync, chownSync, existsSync } from 'node:fs';
import { checkLeaks } from '../helpers/leaks.js';
import * as mp from '../../src/index.js';
import { exportStorage, importStorage } from '../../src/sharing/index.js';
import { managerClient } from '../../src/sharing/manager/client.js';
import { socketPath } from '../../src/sharing/manager/dir.js';
import { addon, EAGAIN, POLL_READABLE } from '../../src/native/index.js';
import { alive, ask, dir, env, exists, holder, killAndWait, managers, newDir, waitFor } from './fixtures/manager-harness.js';
import { segmentOf } from '../helpers/segments.js';

checkLeaks();

test('a manager killed is started again; clients register again with it', async (t) => {
  const a = holder();
  const { names } = await ask(a, { cmd: 'create', count: 2, size: 4096 });
  const first = (await ask(a, { cmd: 'ready' })).manager;
  managers.add(first);
  process.kill(first, 'SIGKILL');
  await waitFor(() => !alive(first));
  assert.ok(existsSync(socketPath(dir)), 'the dead manager left its socket file');
  // The client notices by itself, starts a new manager and registers its names again.
  let second = first;
  await waitFor(async () => {
    // A sync may fail while no manager runs; the bound of waitFor ends a wait that never succeeds.
    const s = await ask(a, { cmd: 'sync' }).catch(() => null);
    if (s !== null && s.manager !== null && s.manager !== first) second = s.manager;
    return second !== first;
  });
  managers.add(second);
  assert.ok(alive(second));
  const ms = await killAndWait(a, names);
  t.diagnostic(`after a manager restart, names removed ${ms.toFixed(1)} ms after SIGKILL`);
});

test('processes starting the manager at once end up with one manager', async () => {
  const d = newDir();
  const peers = [1, 2, 3, 4].map(() => holder({ env: env(d) }));
  await Promise.all(peers.map((p) => ask(p, { cmd: 'create', count: 1, size: 16 })));
  const pids = new Set<number>();
  for (const p of peers) pids.add((await ask(p, { cmd: 'ready' })).manager);
  for (const pid of pids) managers.add(pid);
  assert.equal(pids.size, 1, `one manager, not ${[...pids].join(', ')}`);
  for (const p of peers) {
    p.send({ cmd: 'exit' });
    await p.exited;
  }
});

test('choosing file_system starts a manager before the first segment', async () => {
  const d = newDir();
  // The holder calls setSharingStrategy('file_system') as it loads, and makes no segment. The
  // manager waits longer than the file's 300 ms before stopping, so that a slow poll still sees it.
  const a = holder({ env: { ...env(d), TENSORPROC_MANAGER_IDLE_MS: '3000' } });
  await waitFor(() => existsSync(socketPath(d)));
  const { manager } = await ask(a, { cmd: 'ready' });
  managers.add(manager);
  a.send({ cmd: 'exit' });
  await a.exited;
  await waitFor(() => !alive(manager), 20_000);
});

test('the manager stops by itself once its users are gone', async () => {
  const d = newDir();
  const a = holder({ env: env(d) });
  await ask(a, { cmd: 'create', count: 1, size: 16 });
  const { manager } = await ask(a, { cmd: 'ready' });
  managers.add(manager);
  a.send({ cmd: 'exit' });
  await a.exited;
  await waitFor(() => !alive(manager));
  assert.ok(!existsSync(socketPath(d)), 'it removed its socket');
});

test('the manager refuses a peer of another uid', async (t) => {
  if (process.getuid!() !== 0) return t.skip('needs root to run a manager as another user (setpriv)');
  if (!existsSync('/usr/bin/setpriv')) return t.skip('setpriv is not installed');
  const d = newDir();
  chownSync(d, 65534, 65534); // the manager runs as nobody; this process (root) is the stranger
  const a = holder({ env: env(d), wrap: ['setpriv', '--reuid=65534', '--regid=65534', '--clear-groups'] });
  await ask(a, { cmd: 'create', count: 1, size: 16 });
  const { manager } = await ask(a, { cmd: 'ready' });
  managers.add(manager);
  const fd = addon.unixConnect(socketPath(d)); // root passes the 0700 directory; the uid check must stop it
  try {
    // No hello needed: the manager closes the connection as soon as it sees who connected.
    const answer = await new Promise<number>((resolve) => {
      const poll = new addon.Poll(fd, () => {
        const n = addon.recv(fd, new Uint8Array(1024), new Int32Array(8));
        if (n === EAGAIN) return;
        poll.close();
        resolve(n);
      });
      poll.start(POLL_READABLE);
    });
    assert.equal(answer, -1, 'the manager closed the connection without a welcome');
    assert.throws(() => addon.send(fd, new TextEncoder().encode(JSON.stringify({ t: 'hello', v: 1 }))), { code: 'EPIPE' });
  } finally {
    addon.close(fd);
  }
  a.send({ cmd: 'exit' });
  await a.exited;
});

test('without a usable manager directory: a coded warning, and segments still work', async () => {
  const d = newDir();
  chmodSync(d, 0o755);
  const a = holder({ env: env(d) });
  const [name] = (await ask(a, { cmd: 'create', count: 1, size: 16 })).names;
  let s: any;
  await waitFor(async () => (s = await ask(a, { cmd: 'state' })).state === 'unavailable');
  assert.equal(s.warnings.length, 1);
  assert.deepEqual([s.warnings[0].name, s.warnings[0].code], ['ManagerUnavailableError', 'ERR_TP_MANAGER_UNAVAILABLE']);
  assert.match(s.warnings[0].message, /mode 755/);
  assert.ok(exists(name));
  a.send({ cmd: 'exit' });
  await a.exited;
  assert.ok(!exists(name), 'a clean exit removes it without the manager');
});

test('TENSORPROC_MANAGER=0: no manager, no warning, segments work', async () => {
  const d = newDir();
  const a = holder({ env: { ...env(d), TENSORPROC_MANAGER: '0' } });
  const [name] = (await ask(a, { cmd: 'create', count: 1, size: 16 })).names;
  const s = await ask(a, { cmd: 'state' });
  assert.equal(s.state, 'unavailable');
  assert.deepEqual(s.warnings, []);
  assert.ok(!existsSync(socketPath(d)), 'no manager was started');
  a.send({ cmd: 'exit' });
  await a.exited;
  assert.ok(!exists(name));
});

test('registration is per mapping, not per message', async () => {
  // A directory of its own: no manager runs there yet, so ready() waits for one to start.
  process.env.TENSORPROC_MANAGER_DIR = newDir();
  mp.setSharingStrategy('file_system');
  const t = mp.empty([64], { shared: true }).fill(7);
  try {
    managers.add(await managerClient.ready());
    await managerClient.sync();
    const seg = segmentOf(t);
    const refs = seg.refcount();
    const sent = managerClient.messagesSent;
    for (let i = 0; i < 1000; i++) {
      const { handle } = exportStorage(t.storage);
      assert.equal(importStorage(handle, null), t.storage);
    }
    assert.equal(seg.refcount(), refs);
    assert.equal(managerClient.messagesSent, sent, 'no message to the manager');
    assert.equal(managerClient.state, 'connected');
  } finally {
    t.release();
    mp.emptyCache();
    mp.setSharingStrategy('file_descriptor');
    process.env.TENSORPROC_MANAGER_DIR = dir;
  }
  assert.equal(managerClient.state, 'off', 'nothing mapped: the connection is closed');
});
