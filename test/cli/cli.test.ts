import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { setTimeout as delay } from 'node:timers/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as mp from '../../src/index.js';
import { addon } from '../../src/native/index.js';
import { checkLeaks } from '../helpers/leaks.js';
import { segmentOf } from '../helpers/segments.js';

checkLeaks();
const cli = fileURLToPath(new URL('../../src/cli/main.js', import.meta.url));
const run = (...args: string[]) => spawnSync(process.execPath, [cli, ...args], { encoding: 'utf8' });

test('doctor reports every check', () => {
  const r = run('doctor');
  for (const name of [
    'node',
    'addon',
    'file_descriptor strategy',
    'file_system strategy',
    'default strategy',
    'leftover segments',
    '/dev/shm',
    'memory',
    'open-file limit',
    'manager directory',
    'environment',
  ]) {
    assert.match(r.stdout, new RegExp(`^(ok  |WARN|FAIL)  ${name.replace('/', '\\/')} `, 'm'), name);
  }
  // The exit status and the report agree: 1 with a failed check (this machine may lack one), else 0.
  assert.equal(r.status, /^FAIL/m.test(r.stdout) ? 1 : 0, r.stdout + r.stderr);
});

test('bench refuses an unknown workload with the usage and a non-zero exit, naming those it has', () => {
  const r = run('bench', '--only', 'W1,nope');
  assert.equal(r.status, 2);
  assert.match(r.stderr, /no workload named nope \(have: W1, W2, W3, W3mixed, W4, W5, W6, alloc, messages, sync\)/);
  assert.match(r.stderr, /Usage: tensorproc bench/);
  assert.equal(r.stdout, '', 'nothing ran');
});

test('a missing or broken addon is a failed check and a message, not a crash', () => {
  const runWith = (addonPath: string, ...args: string[]) =>
    spawnSync(process.execPath, [cli, ...args], { encoding: 'utf8', env: { ...process.env, TENSORPROC_ADDON: addonPath } });
  const missing = runWith('/nonexistent/tensorproc.node', 'doctor');
  assert.equal(missing.status, 1);
  assert.match(missing.stdout, /^FAIL\s+addon\s+The tensorproc native addon is not built/m);
  assert.match(missing.stdout, /^FAIL\s+file_descriptor strategy\s+not checked/m);
  assert.match(missing.stdout, /^(ok|WARN|FAIL)\s+open-file limit\s+(soft|unknown)/m, 'the checks that need no addon still run');
  assert.match(missing.stdout, /^(ok|WARN)\s+manager directory\s+\//m);
  assert.doesNotMatch(missing.stderr, /\n\s+at /, 'no stack trace');
  // Not a shared object (a script, even): refused by dlopen, never run.
  const dir = mkdtempSync(join(tmpdir(), 'tensorproc-addon-'));
  try {
    const notElf = join(dir, 'tensorproc.node');
    writeFileSync(notElf, 'process.exit(42)\n');
    const broken = runWith(notElf, 'shm', 'ls');
    assert.equal(broken.status, 1);
    assert.ok(broken.stderr.startsWith(`tensorproc: The tensorproc native addon at ${notElf} does not load`), broken.stderr);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('shm ls shows segments; shm clean removes only those whose users are all dead', () => {
  // A manager starting now would sweep the fake orphan away before `shm ls` sees it.
  process.env.TENSORPROC_MANAGER = '0';
  // An orphan: named for a pid that cannot exist, as a killed process would leave it.
  const orphan = `/tensorproc_2147483647_${'0'.repeat(16)}`;
  addon.close(addon.shmCreate(orphan, 8192));
  mp.setSharingStrategy('file_system');
  const live = mp.empty([16], { shared: true });
  const liveName = segmentOf(live).name!;
  try {
    const ls = run('shm', 'ls').stdout;
    assert.match(ls, new RegExp(`${orphan.slice(1)} .*ORPHANED`));
    assert.match(ls, new RegExp(liveName.slice(1)));
    assert.doesNotMatch(ls.split('\n').find((l) => l.includes(liveName.slice(1)))!, /ORPHANED/);
    assert.match(run('shm', 'clean').stdout, new RegExp(`removed .*${orphan.slice(1)}`));
    assert.equal(existsSync(`/dev/shm${orphan}`), false);
    assert.equal(existsSync(`/dev/shm${liveName}`), true, 'a live process keeps its segment');
  } finally {
    if (existsSync(`/dev/shm${orphan}`)) addon.shmUnlink(orphan);
    live.release();
    mp.emptyCache();
    mp.setSharingStrategy('file_descriptor');
    delete process.env.TENSORPROC_MANAGER;
  }
});

test('every command has --help, exiting 0 with its usage', () => {
  for (const args of [
    ['--help'],
    ['help'],
    ['bench', '--help'],
    ['doctor', '--help'],
    ['shm', '--help'],
    ['shm', 'ls', '--help'],
    ['shm', 'clean', '--help'],
    ['help', 'bench'],
  ]) {
    const r = run(...args);
    assert.equal(r.status, 0, `${args.join(' ')}: ${r.stderr}`);
    const usage = args.filter((a) => a !== '--help' && a !== 'help').join(' ');
    assert.match(r.stdout, new RegExp(`^Usage: tensorproc${usage ? ` ${usage}` : ''} `, 'm'), args.join(' '));
  }
  const version = run('--version');
  assert.equal(version.status, 0);
  assert.equal(
    version.stdout.trim(),
    (JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8')) as { version: string }).version,
  );
  const bench = run('bench', '--help').stdout;
  for (const flag of ['--quick', '--json', '--only <ids>', '--plot <file.svg>', '--runs <n>']) assert.ok(bench.includes(flag), flag);
});

test('a bad command, flag or value prints the usage and exits 2', () => {
  for (const [args, message] of [
    [['frobnicate'], /unknown command 'frobnicate'/],
    [[], /Usage: tensorproc/],
    [['bench', '--nope'], /unknown option '--nope'/],
    [['bench', '--runs', 'many'], /option '--runs <n>' argument 'many' is invalid/],
    [['bench', '--runs', '0'], /a whole number from 1 to 100/],
    [['bench', '--only'], /option '--only <ids>' argument missing/],
    [['bench', 'W1'], /too many arguments/],
    [['bench', '--only', 'W2', '--plot', '/tmp/never.svg'], /--plot draws W1, which this run does not measure: add W1 to --only/],
    [
      ['bench', '--plot', '/tmp/never.png'],
      /option '--plot <file\.svg>' argument '\/tmp\/never\.png' is invalid\. the plot is drawn as SVG/,
    ],
    [['bench', '--plot'], /option '--plot <file\.svg>' argument missing/],
    [['bench', '--quick=1'], /unknown option '--quick=1'/],
    [['help', 'nope'], /Usage: tensorproc \[options\] \[command\]/],
    [['shm'], /Usage: tensorproc shm/],
    [['shm', 'ls', 'extra'], /too many arguments for 'ls'/],
    [['doctor', 'extra'], /too many arguments for 'doctor'/],
    [['shm', 'clean', '--nope'], /unknown option '--nope'/],
    [['doctor', '--all'], /unknown option '--all'/],
    [['shm', 'rm'], /unknown command 'rm'/],
  ] as const) {
    const r = run(...args);
    assert.equal(r.status, 2, `${args.join(' ')}: ${r.stdout}${r.stderr}`);
    assert.match(r.stderr, message, args.join(' '));
    assert.match(r.stderr, /Usage: tensorproc/, `${args.join(' ')} shows the usage`);
  }
});

/**
 * Runs the CLI with its stdout read by a reader that closes it after `lines` lines (0: before
 * the CLI has started), as `| head -n` does; `onClose` sees the CLI's pid at that moment.
 */
function intoClosedPipe(
  args: string[],
  lines: number,
  onClose: (pid: number) => void = () => {},
): Promise<{ status: number | null; signal: string | null; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [cli, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stderr = '';
    child.stderr.setEncoding('utf8').on('data', (s: string) => (stderr += s));
    let seen = 0;
    const close = (): void => {
      onClose(child.pid!);
      child.stdout.destroy();
    };
    if (lines === 0) close();
    else {
      child.stdout.setEncoding('utf8').on('data', (s: string) => {
        seen += s.split('\n').length - 1;
        if (seen >= lines && !child.stdout.destroyed) close();
      });
    }
    child.on('error', reject);
    child.on('close', (status, signal) => resolve({ status, signal, stderr }));
  });
}

/** Whether a process is still running (a zombie, or gone, is not). */
const running = (pid: number): boolean => {
  try {
    return !/^\d+ \(.*\) Z /.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
};

test('output into a reader that closes early ends the command quietly (NOTE [Closed pipe]): status 0, no EPIPE crash', async () => {
  // Closed before the CLI has even started: its help's one write gets EPIPE.
  for (const args of [['--help'], ['bench', '--help'], ['help', 'shm']]) {
    const r = await intoClosedPipe(args, 0);
    assert.deepEqual({ status: r.status, signal: r.signal, stderr: r.stderr }, { status: 0, signal: null, stderr: '' }, args.join(' '));
  }
  // The bench, closed after its first record: the runner stops, and so does the workload program it was running.
  let workloads: number[] = [];
  const r = await intoClosedPipe(['bench', '--quick', '--json', '--only', 'W2'], 1, (pid) => {
    workloads = readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
  });
  assert.deepEqual({ status: r.status, signal: r.signal, stderr: r.stderr }, { status: 0, signal: null, stderr: '' });
  assert.equal(workloads.length, 1, 'the workload program was running when the reader closed');
  // It was sent SIGTERM as the runner exited; wait for it to go (it is not ours to reap).
  for (let i = 0; i < 200 && workloads.some(running); i++) await delay(50);
  assert.deepEqual(workloads.filter(running), [], 'the workload program ended with the runner');
});
