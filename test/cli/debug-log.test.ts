// NODE_DEBUG=tensorproc (src/debug.ts): a small pipeline logs the segments it makes and
// recycles, the manager it starts (whose sweeps go to its log file), and each child's start
// and end; without NODE_DEBUG it logs nothing.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { checkLeaks } from '../helpers/leaks.js';
import { waitFor } from '../helpers/wait.js';

checkLeaks();
const pipeline = fileURLToPath(new URL('./fixtures/debug-pipeline.js', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'tensorproc-debug-'));
test.after(() => rmSync(dir, { recursive: true, force: true }));

function run(name: string, env: Record<string, string>): { status: number | null; stderr: string } {
  const managerDir = join(dir, name);
  // The manager leaves soon after its last client, so that the test can wait for its exit.
  return spawnSync(process.execPath, [pipeline], {
    encoding: 'utf8',
    env: { ...process.env, TENSORPROC_MANAGER_DIR: managerDir, TENSORPROC_MANAGER_IDLE_MS: '200', ...env },
  });
}

test('NODE_DEBUG=tensorproc logs segments made and recycled, the manager started and its sweeps, children started and how they ended', async () => {
  const r = run('debug', { NODE_DEBUG: 'tensorproc' });
  assert.equal(r.status, 0, r.stderr);
  const lines = r.stderr
    .split('\n')
    .filter((l) => /^TENSORPROC \d+: /.test(l))
    .map((l) => l.replace(/^TENSORPROC \d+: /, ''));
  const has = (re: RegExp, what: string): string => {
    const l = lines.find((x) => re.test(x));
    assert.ok(l, `${what}: ${re} in\n${lines.join('\n')}`);
    return l;
  };
  const made = has(/^segment made: file_descriptor, \d+ bytes$/, 'a segment made');
  has(new RegExp(`^segment recycled: file_descriptor, ${/(\d+) bytes/.exec(made)![1]} bytes$`), 'the same segment again');
  has(/^segment made: file_system, \d+ bytes, \/tensorproc_\d+_/, 'a named segment');
  const started = has(/^manager started: pid \d+ for .*\/debug, its sweeps logged to .*\/debug\/manager\.log$/, 'the manager');
  has(/^child 0 started: pid \d+ \(spawn\)$/, 'a child started');
  has(/^child 0 \(pid \d+\) exited with code 0$/, 'a child that returned');
  has(/^child 0 \(pid \d+\) exited with code 3$/, 'a child that exited 3');
  has(/^child 0 \(pid \d+\) exited with code 1 after raising Error: raised on purpose$/, 'a child that raised');
  has(/^child 0 \(pid \d+\) killed by SIGKILL$/, 'a child killed');
  // The manager's own lines, in its log, written until it leaves (200 ms after its last client).
  const file = started.replace(/^.* logged to /, '');
  await waitFor(() => existsSync(file) && readFileSync(file, 'utf8').includes('idle: exiting'));
  const log = readFileSync(file, 'utf8');
  assert.match(log, /manager \d+: listening on /);
  assert.match(log, /manager \d+: swept \/dev\/shm at start: \d+ name\(s\)/);
  assert.match(log, /manager \d+: swept after pid \d+ left: \d+ name\(s\) judged/, 'the pipeline left, and its names were judged');
});

test('without NODE_DEBUG nothing is logged', () => {
  const r = run('quiet', {});
  assert.equal(r.status, 0, r.stderr);
  assert.doesNotMatch(r.stderr, /TENSORPROC/);
});
