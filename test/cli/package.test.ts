// The package as a user installs it: `npm pack`, unpacked into a fresh directory's
// node_modules as npm would (its dependencies beside it, the addon `npm install` builds), then
// the command line run from there. What a checkout hides: the anchors must be found inside
// the package (package.json "files"), not next to it; the child bootstrap's bundle must be the
// one children run although npm unpacks files with times in no useful order; and a person
// gets tables, no JSON lines and no library warnings. W2 stands for the benches here (the
// quickest with an anchor of each kind: a python one and child_process); the full
// `npm pack && npm install ./tensorproc-*.tgz && npx tensorproc bench --quick` is in the
// README's "Benchmarks" section.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { findPythons } from '../../bench/lib/programs.js';
import { checkLeaks } from '../helpers/leaks.js';

checkLeaks();
const repo = fileURLToPath(new URL('../../../', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'tensorproc-package-test-'));
test.after(() => rmSync(dir, { recursive: true, force: true }));

interface Packed {
  filename: string;
  files: { path: string }[];
}

/** The package unpacked as npm installs it, in `dir`/app; returns its root. */
function install(): { root: string; files: string[] } {
  // --ignore-scripts: `prepare` would compile again; the suite runs on what was just built.
  const out = execFileSync('npm', ['pack', '--ignore-scripts', '--json', '--pack-destination', dir], {
    cwd: repo,
    encoding: 'utf8',
    timeout: 120_000,
  });
  const [packed] = JSON.parse(out) as Packed[];
  const root = join(dir, 'app', 'node_modules', 'tensorproc');
  mkdirSync(root, { recursive: true });
  execFileSync('tar', ['-xzf', join(dir, packed!.filename), '-C', root, '--strip-components=1']);
  // npm gives unpacked files the time they were written, in no useful order (tar keeps the
  // archive's one time for all): as npm 10 left them here, the bootstrap a little after its bundle.
  const programsDir = join(root, 'dist/src/programs');
  const now = Date.now() / 1000;
  utimesSync(join(programsDir, 'process-child.bundle.js'), now - 1, now - 1);
  utimesSync(join(programsDir, 'process-child.js'), now, now);
  // What `npm install` adds: the dependencies beside the package, and the addon it builds.
  const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { dependencies: Record<string, string> };
  for (const dep of Object.keys(pkg.dependencies)) {
    const to = join(dir, 'app', 'node_modules', dep);
    mkdirSync(dirname(to), { recursive: true });
    symlinkSync(join(repo, 'node_modules', dep), to);
  }
  mkdirSync(join(root, 'build', 'Release'), { recursive: true });
  copyFileSync(join(repo, 'build', 'Release', 'tensorproc.node'), join(root, 'build', 'Release', 'tensorproc.node'));
  return { root, files: packed!.files.map((f) => f.path) };
}

test('the installed package has its anchors and bootstrap bundle, and its bench and doctor run from it', { timeout: 300_000 }, () => {
  const { root, files } = install();
  for (const f of [
    'dist/src/cli/main.js',
    'dist/bench/run.js',
    'dist/bench/queue.js',
    'dist/bench/spawn.js',
    'dist/bench/anchors/node-ipc.js',
    'bench/anchors/torch-queue.py',
    'bench/anchors/torch-spawn.py',
    'bench/anchors/message-limit.py',
    'dist/src/programs/process-child.bundle.js',
    'dist/bundle/index.js',
    'dist/bundle/programs/process-child.bundle.js',
  ]) {
    assert.ok(files.includes(f), `${f} ships in the package`);
  }
  assert.ok(!files.some((f) => f.startsWith('dist/test/')), 'the tests do not ship');

  // Children of the installed package run the bundle, whatever times npm unpacked it with
  // (asked in a process of its own: this one has its own copy of the library loaded).
  const startModule = pathToFileURL(join(root, 'dist/src/process/child-start.js')).href;
  const chosen = execFileSync(
    process.execPath,
    [
      '--input-type=module',
      '-e',
      `const { processBootstrap } = await import(${JSON.stringify(startModule)}); console.log(processBootstrap().href);`,
    ],
    { encoding: 'utf8', timeout: 60_000 },
  );
  assert.equal(chosen.trim(), pathToFileURL(join(root, 'dist/src/programs/process-child.bundle.js')).href);

  // A user's program beside node_modules: 'tensorproc' is the bundle (NOTE [The package
  // bundle]), and a DataLoader's workers, over a dataset module that imports it too, collate
  // its tensors (one copy of the library in each process).
  const cwd = join(dir, 'app');
  writeFileSync(
    join(cwd, 'data.mjs'),
    "import * as mp from 'tensorproc';\nexport const rows = (n) => ({ length: n, getItem: (i) => mp.full([2], i) });\n",
  );
  writeFileSync(
    join(cwd, 'main.mjs'),
    "import * as mp from 'tensorproc';\n" +
      "console.log(import.meta.resolve('tensorproc'));\n" +
      "const loader = new mp.DataLoader({ module: new URL('./data.mjs', import.meta.url), export: 'rows', args: [6] }, { batchSize: 3, numWorkers: 2 });\n" +
      'for await (const b of loader) console.log(b instanceof mp.Tensor && b.isShared(), JSON.stringify(b.toArray()));\n',
  );
  const user = spawnSync(process.execPath, ['main.mjs'], { cwd, encoding: 'utf8', timeout: 60_000 });
  assert.equal(user.status, 0, user.stderr);
  assert.equal(
    user.stdout,
    `${pathToFileURL(join(root, 'dist/bundle/index.js')).href}\ntrue [[0,0],[1,1],[2,2]]\ntrue [[3,3],[4,4],[5,5]]\n`,
  );

  const cli = join(root, 'dist/src/cli/main.js');
  const doctor = spawnSync(process.execPath, [cli, 'doctor'], { cwd, encoding: 'utf8', timeout: 60_000 });
  assert.match(
    doctor.stdout,
    new RegExp(`^ok +addon +loaded \\(${join(root, 'build/Release/tensorproc.node').replace(/[.]/g, '\\.')}\\)$`, 'm'),
  );
  assert.equal(doctor.status, /^FAIL/m.test(doctor.stdout) ? 1 : 0, doctor.stdout + doctor.stderr);

  const bench = spawnSync(process.execPath, [cli, 'bench', '--quick', '--only', 'W2'], {
    cwd,
    encoding: 'utf8',
    timeout: 180_000,
    env: { ...process.env, TENSORPROC_BENCH_SMOKE: '1' },
  });
  assert.equal(bench.status, 0, bench.stderr);
  assert.match(bench.stdout, /^### W2, s \(lower is better; one run\)$/m);
  assert.match(bench.stdout, /^\| N=2 +\| +tensorproc spawn +\| +[\d.]+x \|/m, 'the child_process anchor beside');
  if (findPythons().torch) assert.match(bench.stdout, /^\| case +\|.*\| torch spawn \|$/m, "torch's anchor found in the package");
  for (const out of [bench.stdout, bench.stderr]) {
    assert.doesNotMatch(out, /^\{/m, 'no JSON lines');
    assert.doesNotMatch(out, /Terminating process|Warning|warning|not in this installation/, 'no library warnings, no anchor missing');
  }
});
