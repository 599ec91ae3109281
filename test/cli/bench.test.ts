// `tensorproc bench` as scripts and people use it: --quick --json prints only records, each
// with its fields (NOTE [Bench records]), for every workload of the yardstick this build has
// and every anchor this machine has; --plot draws one series per implementation measured;
// the tables for a person carry no JSON and no library warnings; what cannot be measured (a
// workload whose program is not in the build, torch where no python3 has it) is said, under
// --json too, while the rest runs; bad options are coded errors before anything runs. The figures themselves
// are not judged here (speed belongs in bench/): these runs are short and the machine shared.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { findPythons } from '../../bench/lib/programs.js';
import { RECORD_FIELDS, type BenchRecord, type NotMeasured } from '../../bench/lib/record.js';
import { chooseWorkloads, runBench, WORKLOADS } from '../../bench/run.js';
import { w1Order } from '../../bench/lib/w1-report.js';
import { checkLeaks } from '../helpers/leaks.js';

checkLeaks();
const cli = fileURLToPath(new URL('../../src/cli/main.js', import.meta.url));
const benchDir = fileURLToPath(new URL('../../bench/', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'tensorproc-bench-test-'));
test.after(() => rmSync(dir, { recursive: true, force: true }));
// The plumbing is checked at the least counts (TENSORPROC_BENCH_SMOKE) and on two of W1's sizes:
// 1 KiB, and 16 MiB where the uncached fill limit is measured too. The full run took 90-190 s
// of CI's 15 minutes for figures that nobody reads.
const SIZES = ['1 KiB', '16 MiB'];
const SMOKE = { ...process.env, TENSORPROC_BENCH_SMOKE: '1', TENSORPROC_BENCH_W1_SIZES: '1024,16777216' };

test('bench --quick --json prints only records, each with its fields, and --plot draws one series per implementation', () => {
  const svg = join(dir, 'w1.svg');
  const r = spawnSync(process.execPath, [cli, 'bench', '--quick', '--json', '--plot', svg], {
    encoding: 'utf8',
    timeout: 300_000,
    env: SMOKE,
  });
  assert.equal(r.status, 0, r.stderr);
  assert.equal(r.stderr, '', 'nothing but records: no progress, no warnings');
  const lines = r.stdout
    .trimEnd()
    .split('\n')
    .map((l) => JSON.parse(l) as BenchRecord | NotMeasured);
  const records = lines.filter((l): l is BenchRecord => !('not_measured' in l));
  const absent = lines.filter((l): l is NotMeasured => 'not_measured' in l);
  for (const a of absent) {
    assert.deepEqual(
      Object.keys(a)
        .filter((k) => k !== 'impl')
        .sort(),
      ['not_measured', 'workload'],
      JSON.stringify(a),
    );
    assert.ok(a.not_measured.length > 0);
  }
  for (const rec of records) {
    for (const f of RECORD_FIELDS) assert.ok(f in rec, `${f} in ${JSON.stringify(rec)}`);
    assert.equal(typeof rec.value, 'number');
    assert.ok(Number.isFinite(rec.value) && rec.value > 0, JSON.stringify(rec));
    assert.ok(rec.better === 'higher' || rec.better === 'lower');
    assert.ok(Number.isInteger(rec.run) && rec.run >= 0);
  }
  // Every workload of the yardstick whose program this build has, and only those.
  const built = WORKLOADS.filter((w) => w.yardstick && existsSync(join(benchDir, w.program))).map((w) => w.id);
  assert.deepEqual([...new Set(records.map((x) => x.workload))].sort(), built.sort());
  // ... and the others said to be missing, in a line of their own, not left out in silence.
  const unbuilt = WORKLOADS.filter((w) => w.yardstick && !built.includes(w.id)).map((w) => w.id);
  assert.deepEqual(
    absent
      .filter((a) => a.impl === undefined)
      .map((a) => a.workload)
      .sort(),
    unbuilt.sort(),
  );

  // W1: every size for both strategies, the limits and the anchors this machine has.
  const w1 = records.filter((x) => x.workload === 'W1');
  const impls = new Set(w1.map((x) => x.impl));
  const expected = [
    'tensorproc file_descriptor',
    'tensorproc file_system',
    'node fork',
    'node worker-copy',
    'node worker-transfer',
    'fill limit',
    'fill limit, uncached',
  ];
  const { torch, any: python } = findPythons();
  if (torch) expected.push('torch file_descriptor', 'torch file_system');
  else
    assert.deepEqual(
      absent
        .filter((a) => a.impl === 'torch')
        .map((a) => a.workload)
        .sort(),
      built.sort(),
      'torch said missing for every workload',
    );
  if (python) expected.push('message limit file_descriptor', 'message limit file_system');
  else assert.ok(absent.some((a) => a.workload === 'W1' && a.impl === 'message limit'));
  assert.deepEqual([...impls].sort(), expected.sort());
  for (const impl of expected.filter((i) => !i.startsWith('message') && i !== 'fill limit, uncached')) {
    assert.deepEqual(
      w1.filter((x) => x.impl === impl).map((x) => x.case),
      SIZES,
      impl,
    );
  }
  // The uncached fill limit where W1 is judged against the fill limit (NOTE [Two fill limits]).
  assert.deepEqual(
    w1.filter((x) => x.impl === 'fill limit, uncached').map((x) => x.case),
    ['16 MiB'],
  );
  for (const x of w1) {
    assert.equal(x.unit, 'msgs/s');
    assert.equal(typeof x.bytes, 'number');
    assert.equal(typeof x.count, 'number');
    assert.equal(typeof x.GB_per_s, 'number');
  }
  if (torch) assert.ok(records.some((x) => x.workload === 'W2' && x.impl === 'torch spawn'));

  // The plot: one line per implementation of W1, named in the SVG as in the records.
  const drawn = [
    ...readFileSync(svg, 'utf8').matchAll(
      /aria-label="[^"]*?implementation: ([^;"]+);[^"]*" role="graphics-symbol" aria-roledescription="line mark"/g,
    ),
  ].map((m) => m[1]!);
  assert.equal(drawn.length, impls.size, `one series each: ${drawn.join(', ')}`);
  assert.deepEqual(drawn.sort(), [...impls].sort());
  // Its legend in the order of W1's tables (ours, torch, Node, the limits), not alphabetical.
  const texts = [...readFileSync(svg, 'utf8').matchAll(/<text[^>]*>([^<]*)<\/text>/g)].map((m) => m[1]!);
  const legend = texts.slice(texts.indexOf('messages/s (consumer side)') + 1, texts.indexOf('implementation'));
  assert.deepEqual(legend, w1Order([...impls]));
  assert.equal(legend[0], 'tensorproc file_descriptor');
});

test('bench for a person: tables with ratios and verdicts, no JSON lines, no library warnings', () => {
  // W2 stops a child with SIGTERM (the failure latency), which tensorproc warns about.
  const r = spawnSync(process.execPath, [cli, 'bench', '--quick', '--only', 'W2'], { encoding: 'utf8', timeout: 120_000, env: SMOKE });
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stdout, /^### W2, s \(lower is better; one run\)$/m);
  assert.match(
    r.stdout,
    /^\| N=2 +\| +tensorproc spawn +\| +[\d.]+x \|.*\| time ≤ 1\.1x fork \(≥ 0\.91x as fast\) \| +(pass|BELOW) \([\d.]+x\) \|$/m,
  );
  assert.match(r.stdout, /^### W2, ms after the exit/m);
  assert.match(
    r.stdout,
    /^These are --quick counts .* For verdicts, run `tensorproc bench`/m,
    "a --quick run says its verdicts are a smoke run's",
  );
  for (const out of [r.stdout, r.stderr]) {
    assert.doesNotMatch(out, /^\{/m, 'no JSON lines');
    assert.doesNotMatch(out, /Terminating process|Warning|warning/, 'no library warnings');
  }
});

test('a workload whose program is not in the build is reported as not measured, in the tables and under --json, and the others run', () => {
  const runner = fileURLToPath(new URL('../../bench/run.js', import.meta.url));
  const run = (json: boolean) =>
    spawnSync(
      process.execPath,
      [
        '--input-type=module',
        '-e',
        `
      import { runBench, WORKLOADS } from ${JSON.stringify(runner)};
      const missing = { id: 'W9', program: 'no-such-workload.js', title: 'a workload still being written', seconds: [1, 1], yardstick: true };
      const messages = WORKLOADS.find((w) => w.id === 'messages');
      process.exitCode = await runBench({ quick: true, json: ${json}, only: ['W9', 'messages'], plot: null, runs: 1 }, [missing, messages]);
    `,
      ],
      { encoding: 'utf8', timeout: 120_000 },
    );
  const r = run(false);
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stderr, /^W9: not measured, bench\/no-such-workload\.ts is not in this build$/m);
  assert.match(
    r.stdout,
    /^Not measured in this run:\n- W9 \(a workload still being written\): bench\/no-such-workload\.ts is not in this build$/m,
  );
  assert.match(r.stdout, /^### messages, µs/m, 'the other workload ran');
  const j = run(true);
  assert.equal(j.status, 0, j.stderr);
  assert.equal(j.stderr, '');
  const lines = j.stdout
    .trimEnd()
    .split('\n')
    .map((l) => JSON.parse(l) as Record<string, unknown>);
  assert.deepEqual(lines[0], { workload: 'W9', not_measured: 'bench/no-such-workload.ts is not in this build' });
  assert.ok(
    lines.slice(1).every((l) => l.workload === 'messages' && typeof l.value === 'number'),
    'then the records of the workload that ran',
  );
});

test('bad bench options are coded errors, thrown before anything runs', async () => {
  assert.throws(() => chooseWorkloads(['W1', 'nope']), {
    name: 'UnknownWorkloadError',
    code: 'ERR_TP_UNKNOWN_WORKLOAD',
    message: /no workload named nope \(have: W1, W2/,
  });
  const options = { quick: true, json: true, runs: 1 };
  await assert.rejects(runBench({ ...options, only: ['W2'], plot: join(dir, 'w.svg') }), {
    name: 'PlotNeedsW1Error',
    code: 'ERR_TP_PLOT_NEEDS_W1',
  });
  await assert.rejects(runBench({ ...options, only: ['W1'], plot: join(dir, 'no-such-dir', 'w.svg') }), {
    name: 'PlotUnavailableError',
    code: 'ERR_TP_PLOT_UNAVAILABLE',
    message: /--plot cannot write .*no-such-dir\/w\.svg/,
  });
});

test('an anchor this machine lacks (piscina not installed, no python3 with torch) is a not-measured record under --json, and the rest runs', () => {
  // Hidden as the runner hands its findings to the workloads: '' is none (programs.ts).
  const env = { ...SMOKE, TENSORPROC_BENCH_PISCINA: '', TENSORPROC_BENCH_PYTHON: '' };
  const r = spawnSync(process.execPath, [cli, 'bench', '--quick', '--json', '--only', 'W3'], { encoding: 'utf8', timeout: 180_000, env });
  assert.equal(r.status, 0, r.stderr);
  assert.equal(r.stderr, '');
  const lines = r.stdout
    .trimEnd()
    .split('\n')
    .map((l) => JSON.parse(l) as Record<string, unknown>);
  const absent = lines.filter((l) => 'not_measured' in l);
  assert.deepEqual(absent.map((a) => [a.workload, a.impl]).sort(), [
    ['W3', 'piscina'],
    ['W3', 'torch'],
  ]);
  assert.match(String(absent.find((a) => a.impl === 'piscina')!.not_measured), /piscina is not installed \(npm install piscina@5/);
  assert.match(String(absent.find((a) => a.impl === 'torch')!.not_measured), /no python3 on PATH .* imports torch/);
  const impls = new Set(lines.filter((l) => !('not_measured' in l)).map((l) => l.impl));
  assert.deepEqual(
    [...impls].sort(),
    ['fresh limit', 'tensorproc processes', 'tensorproc threads'],
    'ours and the limit measured, no anchor',
  );
});
