// The file_system manager removes the names of segments whose users all died, SIGKILL
// included (NOTE [The file_system manager]); live holders keep them; references in flight
// get their grace. Real processes; the latency until a name is gone is reported, not asserted.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { chmodSync, chownSync, existsSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { execFileSync } from 'node:child_process';
import { checkLeaks } from '../helpers/leaks.js';
import { ask, env, exists, holder, killAndWait, logged, managers, newDir, waitFor, waitWithLog } from './fixtures/manager-harness.js';

checkLeaks();

test('SIGKILL a process holding file_system segments: its names are removed', async (t) => {
  const a = holder();
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
  const a = holder();
  const b = holder();
  const [name] = (await ask(a, { cmd: 'create', count: 1, size: 1024 })).names;
  managers.add((await ask(a, { cmd: 'ready' })).manager);
  const { handle } = await ask(a, { cmd: 'export' });
  const opened = await ask(b, { cmd: 'open', handle });
  assert.equal(opened.first, 1);
  assert.equal(opened.refcount, 2, 'creator + receiver');
  await ask(b, { cmd: 'ready' });
  const pid = a.child.pid!;
  a.child.kill('SIGKILL');
  await a.exited;
  // The manager reports judging the death (it takes back the slot in the same turn, after the
  // line); one round trip through it after that, and the header says what it did. Two round
  // trips without waiting for the line once saw refcount 2 on a loaded machine: the judgement
  // may wait for the dead process's connection to be read (NOTE [The file_system manager]).
  await waitWithLog(() => logged(`swept after pid ${pid} `));
  await ask(b, { cmd: 'sync' });
  assert.ok(exists(name), 'the receiver still holds it');
  assert.equal((await ask(b, { cmd: 'refcount' })).refcount, 1, "the creator's hold was taken back");
  const ms = await killAndWait(b, [name]);
  t.diagnostic(`name removed ${ms.toFixed(1)} ms after the last holder's SIGKILL`);
});

test('a message in flight from a SIGKILLed sender: taken within the grace it lives on, else it goes', async (t) => {
  const a = holder();
  const b = holder();
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
  await waitWithLog(() => !exists(names[1]));
  t.diagnostic(`unreceived message's segment removed ${(performance.now() - t0).toFixed(1)} ms after SIGKILL (grace 1000 ms)`);
  assert.ok(exists(names[0]), 'the received one stays while held');
  await ask(b, { cmd: 'release' });
  assert.ok(!exists(names[0]), 'its last holder removed it');
  await ask(b, { cmd: 'exit' }).catch(() => {});
  await b.exited;
});

// The manager learns of a death from the pidfd, and of the goodbye (or its absence) from
// the connection; the two come in either order. A death judged before the connection's end
// was read passed for a clean exit, and then a message in flight kept its name for as long
// as any user lived (here b), instead of for the crash grace.
test('a sender SIGKILLed with a message in flight of a segment it let go: the name goes after the crash grace while users live', async (t) => {
  const a = holder();
  const b = holder();
  await ask(b, { cmd: 'create', count: 1, size: 16 }); // b is a user of the manager too
  const names = (await ask(a, { cmd: 'create', count: 2, size: 16 })).names;
  managers.add((await ask(a, { cmd: 'ready' })).manager);
  await ask(a, { cmd: 'export', index: 0 });
  await ask(a, { cmd: 'releaseAt', index: 0 }); // only the message's reference is left
  await ask(a, { cmd: 'sync' }); // a still maps names[1]: its connection stays open
  const t0 = performance.now();
  a.child.kill('SIGKILL');
  await a.exited;
  try {
    // Once failed under load, and the test after it with it (this b, a user, still alive kept
    // that test's name): the manager's log now says how the kill was judged.
    await waitWithLog(() => !exists(names[0]));
    t.diagnostic(`removed ${(performance.now() - t0).toFixed(1)} ms after SIGKILL (grace 1000 ms) while another user lives`);
    assert.ok(!exists(names[1]));
  } finally {
    await ask(b, { cmd: 'exit' }).catch(() => {});
    await b.exited;
  }
});

test('a sender that exits cleanly leaves its message receivable', async () => {
  const a = holder();
  const b = holder();
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

// The crash grace a killed last user gives (NOTE [The file_system manager]) is for the
// messages it may have taken down with it. Once a user has since left cleanly, a later
// clean sender's messages get the clean grace again: this once removed such a name as soon
// as its sender exited, when a user had been killed over a second before (flaky in CI,
// depending on the previous test's timing; here the order is forced).
test('after a killed user is judged, a sender that exits cleanly still leaves its message receivable', async () => {
  const k = holder();
  const names = (await ask(k, { cmd: 'create', count: 1, size: 16 })).names;
  managers.add((await ask(k, { cmd: 'ready' })).manager);
  await ask(k, { cmd: 'export', index: 0 });
  await ask(k, { cmd: 'releaseAt', index: 0 });
  await ask(k, { cmd: 'sync' });
  k.child.kill('SIGKILL');
  await k.exited;
  await waitWithLog(() => !exists(names[0])); // the crash grace (1 s) has passed since the kill
  const a = holder();
  const b = holder();
  const [name] = (await ask(a, { cmd: 'create', count: 1, size: 1024 })).names;
  const { handle } = await ask(a, { cmd: 'export' });
  await ask(a, { cmd: 'release' });
  a.send({ cmd: 'exit' });
  assert.equal((await a.exited).code, 0);
  assert.ok(exists(name), 'the message in flight keeps it');
  const opened = await ask(b, { cmd: 'open', handle });
  assert.equal(opened.first, 1);
  await ask(b, { cmd: 'release' });
  assert.ok(!exists(name));
  b.send({ cmd: 'exit' });
  await b.exited;
});

test('a process killed before its registration went out: the names it created go all the same', async (t) => {
  const a = holder();
  await ask(a, { cmd: 'create', count: 1, size: 16 });
  managers.add((await ask(a, { cmd: 'ready' })).manager);
  const { names } = await ask(a, { cmd: 'createAndSpin', size: 16 });
  assert.ok(exists(names[0]));
  const ms = await killAndWait(a, names);
  t.diagnostic(`unregistered name removed ${ms.toFixed(1)} ms after SIGKILL (found by the pid in its name)`);
});

test('a sender that exits cleanly with a message nobody takes: the name goes once no user is left', async (t) => {
  const d = newDir();
  const a = holder({ env: env(d) });
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

// The clean grace is lengthened here (60 s): at 2 s, a loaded machine that took over a second
// from the sender's exit to the kill saw the clean grace end first (the name went as "no
// process left", a failure of the test, not of the manager). Now only the crash grace from the
// kill can remove it within waitFor's 5 s.
test('a sender exits cleanly with a message in flight, then the last user is SIGKILLed: the name gets the crash grace from the kill, not the clean one', async (t) => {
  const d = newDir();
  const log = join(d, 'removed.log');
  const e = { ...env(d), TENSORPROC_MANAGER_LOG: log, TENSORPROC_MANAGER_CLEAN_GRACE_MS: '60000' };
  const a = holder({ env: e });
  const b = holder({ env: e });
  const [name] = (await ask(a, { cmd: 'create', count: 1, size: 16 })).names;
  managers.add((await ask(a, { cmd: 'ready' })).manager);
  await ask(b, { cmd: 'create', count: 1, size: 16 });
  await ask(b, { cmd: 'ready' }); // a user, the one that could still receive the message
  await ask(a, { cmd: 'export' });
  await ask(a, { cmd: 'release' });
  a.send({ cmd: 'exit' });
  assert.equal((await a.exited).code, 0);
  assert.ok(exists(name), 'the message in flight keeps it while a user lives');
  const ms = await killAndWait(b, [name]);
  t.diagnostic(`removed ${ms.toFixed(1)} ms after the last user's SIGKILL (crash grace 1000 ms; the clean grace, 2000 ms, had just begun)`);
  await waitFor(() => readFileSync(log, 'latin1').includes(`removed ${name}: `)); // written just after the unlink
  assert.match(
    readFileSync(log, 'latin1'),
    new RegExp(`removed ${name}: 1 reference\\(s\\) in flight, and the last process that could take them was killed`),
  );
});

test('names left by a process killed while no manager ran are swept when one starts', async (t) => {
  const bad = newDir();
  chmodSync(bad, 0o755); // unusable: this holder runs without a manager
  const a = holder({ env: env(bad) });
  const [name] = (await ask(a, { cmd: 'create', count: 1, size: 16 })).names;
  a.child.kill('SIGKILL');
  await a.exited;
  assert.ok(exists(name), 'nobody removed it');
  const d = newDir();
  const b = holder({ env: env(d) });
  await ask(b, { cmd: 'create', count: 1, size: 16 });
  managers.add((await ask(b, { cmd: 'ready' })).manager);
  const ms = await waitFor(() => !exists(name));
  t.diagnostic(`swept ${ms.toFixed(1)} ms after the new manager answered`);
  b.send({ cmd: 'exit' });
  await b.exited;
});

test('segments held by worker threads: a thread that ends leaves the others; the death of the process takes all', async (t) => {
  const a = holder();
  const [mine] = (await ask(a, { cmd: 'create', count: 1, size: 16 })).names;
  managers.add((await ask(a, { cmd: 'ready' })).manager);
  const first = (await ask(a, { cmd: 'thread' })).name;
  await ask(a, { cmd: 'terminateThreads' });
  const second = (await ask(a, { cmd: 'thread' })).name;
  await ask(a, { cmd: 'sync' });
  await ask(a, { cmd: 'sync' });
  assert.ok(exists(mine) && exists(second), 'the process and its live thread still hold theirs');
  const ms = await killAndWait(a, [mine, first, second]);
  t.diagnostic(`process with threads: names removed ${ms.toFixed(1)} ms after SIGKILL`);
});

// A name alone proves nothing: anyone can make /dev/shm/tensorproc_<pid>_… (a manager running
// as root could open and remove every user's). Only regular files of the manager's own uid
// that are (or were becoming) tensorproc segments are removed.
test('a dead holder: files named like its segments but of another user, not regular, or not segments are left alone', {
  skip: process.getuid!() !== 0 && 'needs root (files of another uid)',
}, async () => {
  const a = holder();
  const { names } = await ask(a, { cmd: 'create', count: 1, size: 16 });
  managers.add((await ask(a, { cmd: 'ready' })).manager);
  const pid = a.child.pid!;
  const path = (c: string): string => `/dev/shm/tensorproc_${pid}_${c.repeat(16)}`;
  const others = [path('a'), path('b'), path('c')];
  try {
    writeFileSync(others[0]!, Buffer.alloc(8192)); // another user's, the size of a segment
    chownSync(others[0]!, 65534, 65534);
    execFileSync('mkfifo', ['-m', '600', others[1]!]); // ours, but a FIFO
    const h = Buffer.alloc(8192); // ours and regular, but a header that is not a segment's
    h.writeUInt32LE(0x12345678, 0);
    writeFileSync(others[2]!, h, { mode: 0o600 });
    await killAndWait(a, names); // its own segment goes: the death was judged
    for (const p of others) assert.ok(existsSync(p), `${p} was removed`);
    assert.equal(statSync(others[0]!).uid, 65534);
  } finally {
    for (const p of others) rmSync(p, { force: true });
  }
});
