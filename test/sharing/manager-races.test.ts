// A process killed in the first moments of its first named segment: its name goes all the
// same (NOTE [Registering before creating] in src/sharing/segment.ts). Found by the fault
// campaign (test/faults, kill-producer under file_system): a producer killed while making
// its first 4 MiB segment left the name until the next manager's start.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { checkLeaks } from '../helpers/leaks.js';
import { ask, env, holder, managers, newDir, waitFor } from './fixtures/manager-harness.js';

checkLeaks();

const createdBy = (pid: number): string[] => readdirSync('/dev/shm').filter((n) => n.startsWith(`tensorproc_${pid}_`));
const logged = (log: string, text: string): boolean => existsSync(log) && readFileSync(log, 'utf8').includes(text);

test('a process killed after connecting and before the manager accepted it: the names it created go', async () => {
  const d = newDir();
  const log = join(d, 'manager.log');
  const e = { ...env(d), TENSORPROC_MANAGER_LOG: log };
  const a = holder({ env: e });
  try {
    await ask(a, { cmd: 'create', count: 1, size: 16 });
    const manager = (await ask(a, { cmd: 'ready' })).manager as number;
    managers.add(manager);
    // A stopped manager accepts nothing: b's connection waits in the listen backlog.
    process.kill(manager, 'SIGSTOP');
    let pid: number;
    try {
      const b = holder({ env: e });
      pid = b.child.pid!;
      const { names } = await ask(b, { cmd: 'create', count: 1, size: 16 });
      assert.ok(existsSync(`/dev/shm${names[0]}`));
      b.child.kill('SIGKILL');
      await b.exited; // reaped: its pidfd can no longer be opened
    } finally {
      process.kill(manager, 'SIGCONT');
    }
    // Both waited for: a reader between the manager's unlink and its next log line would see
    // one without the other.
    const why = `pid ${pid} was gone when its connection was accepted: 1 name(s) it created judged`;
    await waitFor(() => createdBy(pid).length === 0 && logged(log, why)).catch(() => {
      assert.fail(
        `names of ${pid} left: [${createdBy(pid).join(', ')}]; the manager's log:\n${existsSync(log) ? readFileSync(log, 'utf8') : '(none)'}`,
      );
    });
    await ask(a, { cmd: 'release' });
  } finally {
    a.send({ cmd: 'exit' });
    await a.exited;
  }
});

test('a process killed while its first named segment is being made (the name exists, nothing else yet): the name goes', async () => {
  const d = newDir();
  const log = join(d, 'manager.log');
  const e = { ...env(d), TENSORPROC_MANAGER_LOG: log };
  const a = holder({ env: e });
  await ask(a, { cmd: 'create', count: 1, size: 16 });
  managers.add((await ask(a, { cmd: 'ready' })).manager);
  const b = holder({ env: e }); // never connected: this is its first segment
  b.send({ cmd: 'createDyingInCreate', size: 1 << 20 });
  assert.equal((await b.exited).signal, 'SIGKILL');
  const pid = b.child.pid!;
  await waitFor(() => logged(log, `removed /tensorproc_${pid}_`));
  assert.deepEqual(createdBy(pid), []);
  await ask(a, { cmd: 'release' });
  a.send({ cmd: 'exit' });
  await a.exited;
});
