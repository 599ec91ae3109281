// The file_system manager (NOTE [The file_system manager]): names of segments whose users
// all died are removed, SIGKILL included; live holders keep them; the manager refuses other
// users, is started again after a kill, and stops by itself. Every test runs real processes
// against a manager of this file's own (its own directory), so that killing it disturbs no
// other suite. Waiting for a name to disappear polls with a bound; the latency is reported,
// not asserted.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { chownSync, chmodSync, existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { checkLeaks } from '../helpers/leaks.js';
import { startPeer, fixture, type Peer } from '../helpers/child.js';
import * as mp from '../../src/index.js';
import { exportStorage, importStorage, type Lease } from '../../src/sharing/index.js';
import { managerClient } from '../../src/sharing/manager/client.js';
import { socketPath } from '../../src/sharing/manager/dir.js';
import { addon, EAGAIN, POLL_READABLE } from '../../src/native/index.js';

checkLeaks();
const script = fixture(import.meta.url, 'manager-holder.js');
const dirs: string[] = [];
function newDir(): string {
  const d = mkdtempSync('/tmp/tensorproc-manager-test-'); // mode 0700
  dirs.push(d);
  return d;
}
const dir = newDir();
// This process too (the in-process test) talks to this file's manager.
process.env.TENSORPROC_MANAGER_DIR = dir;
process.env.TENSORPROC_MANAGER_IDLE_MS = '300';
const env = (d = dir) => ({ ...process.env, TENSORPROC_MANAGER_DIR: d, TENSORPROC_MANAGER_IDLE_MS: '300' });

/** Managers seen, stopped at the end if still running (they would stop by themselves 300 ms after their last user). */
const managers = new Set<number>();
after(async () => {
  for (const pid of managers) {
    if (alive(pid)) process.kill(pid, 'SIGKILL');
    await waitFor(() => !alive(pid));
  }
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

function alive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'latin1');
    return stat[stat.lastIndexOf(')') + 2] !== 'Z';
  } catch {
    return false;
  }
}
const exists = (name: string) => existsSync(`/dev/shm${name}`);

/** Polls `cond` until it holds; returns the milliseconds it took. Fails after `ms`. */
async function waitFor(cond: () => boolean, ms = 5000): Promise<number> {
  const t0 = performance.now();
  while (!cond()) {
    if (performance.now() - t0 > ms) throw new Error(`condition not met within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 2));
  }
  return performance.now() - t0;
}

async function ask(peer: Peer, msg: Record<string, unknown>): Promise<any> {
  peer.send(msg);
  const r = await peer.next();
  if (r.error) throw Object.assign(new Error(r.error.message), r.error);
  return r;
}

async function holder(opts: { env?: NodeJS.ProcessEnv; wrap?: string[] } = {}): Promise<Peer> {
  return startPeer(script, [], { env: opts.env ?? env(), wrap: opts.wrap });
}

/** Kills `peer` and returns the ms from the kill until every name in `names` is gone. */
async function killAndWait(peer: Peer, names: string[]): Promise<number> {
  const t0 = performance.now();
  peer.child.kill('SIGKILL');
  await peer.exited;
  await waitFor(() => names.every((n: string) => !exists(n)), 5000);
  return performance.now() - t0;
}

test('SIGKILL a process holding file_system segments: its names are removed', async (t) => {
  const a = await holder();
  const { names } = await ask(a, { cmd: 'create', count: 3, size: 256 * 1024 });
  const big = await ask(a, { cmd: 'create', count: 1, size: 16 });
  names.push(...big.names);
  const { manager } = await ask(a, { cmd: 'ready' });
  managers.add(manager);
  assert.ok(names.every(exists));
  const ms = await killAndWait(a, names);
  t.diagnostic(`names removed ${ms.toFixed(1)} ms after SIGKILL`);
  assert.ok(names.every((n: string) => !exists(n)));
});

test('a live holder keeps a name while its creator is SIGKILLed; it goes with the last holder', async (t) => {
  const a = await holder();
  const b = await holder();
  const [name] = (await ask(a, { cmd: 'create', count: 1, size: 1024 })).names;
  managers.add((await ask(a, { cmd: 'ready' })).manager);
  const { handle } = await ask(a, { cmd: 'export' });
  const opened = await ask(b, { cmd: 'open', handle });
  assert.equal(opened.first, 1);
  assert.equal(opened.refcount, 2, 'creator + receiver');
  await ask(b, { cmd: 'ready' });
  a.child.kill('SIGKILL');
  await a.exited;
  // Two round trips through the manager after the death: its pidfd event, ready before the
  // first, has been handled before the second is answered.
  await ask(b, { cmd: 'sync' });
  await ask(b, { cmd: 'sync' });
  assert.ok(exists(name), 'the receiver still holds it');
  assert.equal((await ask(b, { cmd: 'refcount' })).refcount, 1, "the creator's hold was taken back");
  const ms = await killAndWait(b, [name]);
  t.diagnostic(`name removed ${ms.toFixed(1)} ms after the last holder's SIGKILL`);
});

test('a message in flight from a SIGKILLed sender: taken within the grace it lives on, else it goes', async (t) => {
  const a = await holder();
  const b = await holder();
  const { names } = await ask(a, { cmd: 'create', count: 2, size: 1024 });
  managers.add((await ask(a, { cmd: 'ready' })).manager);
  const taken = (await ask(a, { cmd: 'export', index: 0 })).handle;
  await ask(a, { cmd: 'export', index: 1 }); // never received
  const t0 = performance.now();
  a.child.kill('SIGKILL');
  await a.exited;
  const opened = await ask(b, { cmd: 'open', handle: taken });
  assert.equal(opened.first, 1, 'the receiver got the data of a dead sender');
  await ask(b, { cmd: 'sync' });
  await waitFor(() => !exists(names[1]));
  t.diagnostic(`unreceived message's segment removed ${(performance.now() - t0).toFixed(1)} ms after SIGKILL (grace 1000 ms)`);
  assert.ok(exists(names[0]), 'the received one stays while held');
  await ask(b, { cmd: 'release' });
  assert.ok(!exists(names[0]), 'its last holder removed it');
  await ask(b, { cmd: 'exit' }).catch(() => {});
  await b.exited;
});

test('a sender that exits cleanly leaves its message receivable', async () => {
  const a = await holder();
  const b = await holder();
  const [name] = (await ask(a, { cmd: 'create', count: 1, size: 1024 })).names;
  managers.add((await ask(a, { cmd: 'ready' })).manager);
  const { handle } = await ask(a, { cmd: 'export' });
  await ask(a, { cmd: 'release' });
  a.send({ cmd: 'exit' });
  const { code } = await a.exited;
  assert.equal(code, 0);
  assert.ok(exists(name), 'the message in flight keeps it');
  const opened = await ask(b, { cmd: 'open', handle });
  assert.equal(opened.first, 1);
  assert.equal(opened.refcount, 1);
  await ask(b, { cmd: 'release' });
  assert.ok(!exists(name));
  b.send({ cmd: 'exit' });
  await b.exited;
});

test('a process killed before its registration went out: the names it created go all the same', async (t) => {
  const a = await holder();
  await ask(a, { cmd: 'create', count: 1, size: 16 });
  managers.add((await ask(a, { cmd: 'ready' })).manager);
  const { names } = await ask(a, { cmd: 'createAndSpin', size: 16 });
  assert.ok(exists(names[0]));
  const ms = await killAndWait(a, names);
  t.diagnostic(`unregistered name removed ${ms.toFixed(1)} ms after SIGKILL (found by the pid in its name)`);
});

test('a sender that exits cleanly with a message nobody takes: the name goes once no user is left', async (t) => {
  const d = newDir();
  const a = await holder({ env: env(d) });
  const [name] = (await ask(a, { cmd: 'create', count: 1, size: 16 })).names;
  managers.add((await ask(a, { cmd: 'ready' })).manager);
  await ask(a, { cmd: 'export' });
  await ask(a, { cmd: 'release' });
  const t0 = performance.now();
  a.send({ cmd: 'exit' });
  await a.exited;
  assert.ok(exists(name));
  await waitFor(() => !exists(name));
  t.diagnostic(`removed ${(performance.now() - t0).toFixed(1)} ms after a clean exit (grace 2000 ms)`);
});

test('names left by a process killed while no manager ran are swept when one starts', async (t) => {
  const bad = newDir();
  chmodSync(bad, 0o755); // unusable: this holder runs without a manager
  const a = await holder({ env: env(bad) });
  const [name] = (await ask(a, { cmd: 'create', count: 1, size: 16 })).names;
  a.child.kill('SIGKILL');
  await a.exited;
  assert.ok(exists(name), 'nobody removed it');
  const d = newDir();
  const b = await holder({ env: env(d) });
  await ask(b, { cmd: 'create', count: 1, size: 16 });
  managers.add((await ask(b, { cmd: 'ready' })).manager);
  const ms = await waitFor(() => !exists(name));
  t.diagnostic(`swept ${ms.toFixed(1)} ms after the new manager answered`);
  b.send({ cmd: 'exit' });
  await b.exited;
});

test('a manager killed is started again; clients register again with it', async (t) => {
  const a = await holder();
  const { names } = await ask(a, { cmd: 'create', count: 2, size: 4096 });
  const first = (await ask(a, { cmd: 'ready' })).manager;
  managers.add(first);
  process.kill(first, 'SIGKILL');
  await waitFor(() => !alive(first));
  assert.ok(existsSync(socketPath(dir)), 'the dead manager left its socket file');
  // The client notices by itself, starts a new manager and registers its names again.
  let second = first;
  for (;;) {
    const s = await ask(a, { cmd: 'sync' }).catch(() => null);
    if (s !== null && s.manager !== null && s.manager !== first) {
      second = s.manager;
      break;
    }
    await new Promise((r) => setTimeout(r, 5));
  }
  managers.add(second);
  assert.ok(alive(second));
  const ms = await killAndWait(a, names);
  t.diagnostic(`after a manager restart, names removed ${ms.toFixed(1)} ms after SIGKILL`);
});

test('processes starting the manager at once end up with one manager', async () => {
  const d = newDir();
  const peers = await Promise.all([1, 2, 3, 4].map(() => holder({ env: env(d) })));
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

test('the manager stops by itself once its users are gone', async () => {
  const d = newDir();
  const a = await holder({ env: env(d) });
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
  const a = await holder({ env: env(d), wrap: ['setpriv', '--reuid=65534', '--regid=65534', '--clear-groups'] });
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
  const a = await holder({ env: env(d) });
  const [name] = (await ask(a, { cmd: 'create', count: 1, size: 16 })).names;
  let s: any;
  for (;;) {
    s = await ask(a, { cmd: 'state' });
    if (s.state === 'unavailable') break;
    await new Promise((r) => setTimeout(r, 5));
  }
  assert.equal(s.warnings.length, 1);
  assert.equal(s.warnings[0].code, 'ERR_TP_MANAGER_UNAVAILABLE');
  assert.match(s.warnings[0].message, /mode 755/);
  assert.ok(exists(name));
  a.send({ cmd: 'exit' });
  await a.exited;
  assert.ok(!exists(name), 'a clean exit removes it without the manager');
});

test('registration is per mapping, not per message', async () => {
  // A directory of its own: no manager runs there yet, so ready() waits for one to start.
  process.env.TENSORPROC_MANAGER_DIR = newDir();
  mp.setSharingStrategy('file_system');
  const t = mp.empty([64], { shared: true }).fill(7);
  try {
    managers.add(await managerClient.ready());
    await managerClient.sync();
    const seg = (t.storage.backing as Lease).segment;
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
