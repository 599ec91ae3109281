// `tensorproc doctor`'s warnings, each with its condition made real for one run of the
// command: a container-sized /dev/shm (a 64 MiB tmpfs mounted over it in a mount namespace of
// the command's own), a low open-file limit (set for the command by the shell), a manager
// directory that cannot be made or that others could enter. A warning says how to fix what
// it found and leaves the exit status 0; only a failed check makes it 1.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { checkLeaks } from '../helpers/leaks.js';

checkLeaks();
const cli = fileURLToPath(new URL('../../src/cli/main.js', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'tensorproc-doctor-'));
test.after(() => rmSync(dir, { recursive: true, force: true }));

/** Runs `doctor` through sh, with `prefix` before it (a ulimit, say) and env additions. */
function doctor(prefix: string, env: Record<string, string> = {}): { status: number | null; lines: Map<string, string>; out: string } {
  const r = spawnSync('sh', ['-c', `${prefix} exec "$0" "$1" doctor`, process.execPath, cli], {
    encoding: 'utf8',
    env: { ...process.env, ...env },
  });
  const lines = new Map<string, string>();
  for (const l of r.stdout.split('\n')) {
    const m = /^(ok {2}|WARN|FAIL) {2}(.+?) {2,}(.*)$/.exec(l);
    if (m) lines.set(m[2]!.trim(), `${m[1]!.trim()} ${m[3]}`);
  }
  return { status: r.status, lines, out: r.stdout + r.stderr };
}

test('a /dev/shm of 64 MiB, as Docker gives, is a warning naming --shm-size', (t) => {
  // Root in a mount namespace of its own: the tmpfs is seen by this one command only.
  const probe = spawnSync('unshare', ['-m', 'sh', '-c', 'mount -t tmpfs -o size=64m tmpfs /dev/shm'], { encoding: 'utf8' });
  if (probe.status !== 0) {
    t.skip(`cannot mount a small /dev/shm here (needs root and unshare): ${(probe.stderr || probe.error?.message || '').trim()}`);
    return;
  }
  const r = spawnSync(
    'unshare',
    ['-m', 'sh', '-c', 'mount -t tmpfs -o size=64m tmpfs /dev/shm && exec "$0" "$1" doctor', process.execPath, cli],
    { encoding: 'utf8' },
  );
  assert.match(r.stdout, /^WARN {2}\/dev\/shm +only 64 MiB \(64 MiB free\), a container's default: .*--shm-size=8g/m, r.stdout + r.stderr);
  assert.equal(r.status, 0, 'a warning is not a failure');
  // The same machine without the small tmpfs: no warning.
  assert.match(doctor('').lines.get('/dev/shm')!, /^ok \d/);
});

test('a low open-file limit is a warning naming how to raise it; a low soft limit alone is not, node raises it', () => {
  const low = doctor('ulimit -n 256 &&');
  assert.match(
    low.lines.get('open-file limit')!,
    /^WARN 256 \(hard 256\): .*ERR_TP_TOO_MANY_FILES.* Raise the hard limit, .*ulimit -Hn 65536.*--ulimit nofile=65536:65536/,
    low.out,
  );
  assert.equal(low.status, 0, 'a warning is not a failure');
  const soft = doctor('ulimit -Sn 256 &&');
  assert.match(soft.lines.get('open-file limit')!, /^ok soft (\d+), hard \1$/, soft.out);
});

test('a manager directory that cannot be made, or that others can enter, is a warning; a missing one that can be made is fine and is not made', () => {
  const file = join(dir, 'a-file');
  writeFileSync(file, '');
  const blocked = doctor('', { TENSORPROC_MANAGER_DIR: join(file, 'tensorproc') });
  assert.match(
    blocked.lines.get('manager directory')!,
    /^WARN .*a-file\/tensorproc is missing and cannot be made \(.*a-file is not a directory\): file_system cannot start its manager.*TENSORPROC_MANAGER_DIR/,
    blocked.out,
  );
  assert.equal(blocked.status, 0);

  const open = join(dir, 'open');
  mkdirSync(open);
  chmodSync(open, 0o755);
  assert.match(
    doctor('', { TENSORPROC_MANAGER_DIR: open }).lines.get('manager directory')!,
    /^WARN .*open is open to other users \(mode 755, needs 700\)/,
  );

  const later = join(dir, 'later', 'tensorproc');
  assert.match(
    doctor('', { TENSORPROC_MANAGER_DIR: later }).lines.get('manager directory')!,
    /^ok .*later\/tensorproc \(missing: made at first use of file_system\)/,
  );
  assert.equal(existsSync(later), false, 'doctor makes nothing');

  const fine = join(dir, 'fine');
  mkdirSync(fine, { mode: 0o700 });
  assert.equal(doctor('', { TENSORPROC_MANAGER_DIR: fine }).lines.get('manager directory'), `ok ${fine}`);
});

test('TENSORPROC_* variables: those set are listed; an unknown name or an unreadable number is a warning naming it', () => {
  const clean = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('TENSORPROC_')));
  const run = (env: Record<string, string>): string => {
    const r = spawnSync(process.execPath, [cli, 'doctor'], { encoding: 'utf8', env: { ...clean, ...env } });
    const line = r.stdout.split('\n').find((l) => /^(ok {2}|WARN|FAIL) {2}environment /.test(l));
    assert.ok(line, r.stdout + r.stderr);
    return line;
  };
  assert.match(run({}), /^ok {4}environment +no TENSORPROC_\* variable set: every default$/);
  assert.match(run({ TENSORPROC_SPIN_US: '50' }), /^ok {4}environment +TENSORPROC_SPIN_US=50$/);
  const typo = run({ TENSORPROC_CACHE_BYTE: '1000' });
  assert.match(typo, /^WARN {2}environment +TENSORPROC_CACHE_BYTE is not a tensorproc variable \(ignored\)/);
  assert.match(typo, /docs\/tensors\.md/);
  assert.match(
    run({ TENSORPROC_CACHE_DECAY_MS: 'soon' }),
    /^WARN .*TENSORPROC_CACHE_DECAY_MS=soon is not a number it takes \(its default, 2000, is used\)/,
  );
});
