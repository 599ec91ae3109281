// The fault campaign tells processes apart by their command lines (procs.ts): the manager
// outlives its users on purpose and must not be taken for a process a trial left. Those
// patterns name the library's program paths, so they are checked against the real programs
// here: a move of a program (as the layout's) fails this test instead of the campaign.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as mp from '../../src/index.js';
import { checkLeaks } from '../helpers/leaks.js';
import { isChild, isManager } from './procs.js';

checkLeaks();

/** Starts the manager program at `path` for a directory of its own, checks `isManager`, ends it. */
async function managerIsKnown(path: string): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'tp-procs-')); // mode 700, as the manager wants
  const child = spawn(process.execPath, [fileURLToPath(new URL(path, import.meta.url)), dir], { stdio: 'ignore' });
  const exited = new Promise((resolve) => child.once('exit', resolve));
  try {
    await new Promise((resolve, reject) => child.once('spawn', resolve).once('error', reject));
    assert.equal(isManager(child.pid!), true, path);
    assert.equal(isChild(child.pid!), false, path);
  } finally {
    child.kill('SIGKILL');
    await exited;
    rmSync(dir, { recursive: true, force: true });
  }
}

test("isManager() knows the file_system manager's program, unbundled and bundled", async () => {
  await managerIsKnown('../../src/programs/manager.js');
  await managerIsKnown('../../bundle/programs/manager.js');
  assert.equal(isManager(process.pid), false);
});

test("isChild() knows a process child's bootstrap", async () => {
  const ready = new mp.Event();
  const release = new mp.Event();
  const ctx = mp.spawn({ module: new URL('./procs-child.js', import.meta.url) }, { args: [ready, release], join: false });
  try {
    assert.equal(await ready.wait(30_000), true);
    const [pid] = ctx.pids();
    assert.equal(isChild(pid!), true);
    assert.equal(isManager(pid!), false);
  } finally {
    release.set();
    while (!(await ctx.join()));
    ready.close();
    release.close();
  }
});
