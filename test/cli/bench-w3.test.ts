// W3 (the Pool, issue 11) under `tensorproc bench`: --quick --json --only W3 prints records of
// every case for both of tensorproc's start methods and for each anchor this machine has
// (torch's Pool when a python3 has torch, piscina always: it is a devDependency), with their
// fields (NOTE [Bench records]); the same records make a report with issue 11's bars and a
// verdict per case. The figures are not judged here: the run is short and the machine shared.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { findPythons } from '../../bench/lib/programs.js';
import { RECORD_FIELDS, type BenchRecord } from '../../bench/lib/record.js';
import { report } from '../../bench/lib/report.js';
import { checkLeaks } from '../helpers/leaks.js';

checkLeaks();
const cli = fileURLToPath(new URL('../../src/cli/main.js', import.meta.url));
// At the least counts (TENSORPROC_BENCH_SMOKE: a hundredth of the yardstick's tasks).
const CASES: [string, number][] = [
  ['tiny, chunksize 1', 200],
  ['tiny, default chunksize', 2_000],
  ['1 MiB tensor results', 5],
];

test('bench --quick --json --only W3: every case for tensorproc and each anchor, with their fields, and a verdict per bar', () => {
  const r = spawnSync(process.execPath, [cli, 'bench', '--quick', '--json', '--only', 'W3'], {
    encoding: 'utf8',
    timeout: 240_000,
    env: { ...process.env, TENSORPROC_BENCH_SMOKE: '1' },
  });
  assert.equal(r.status, 0, r.stderr);
  assert.equal(r.stderr, '', 'nothing but records');
  const records = r.stdout
    .trimEnd()
    .split('\n')
    .map((l) => JSON.parse(l) as BenchRecord);
  for (const rec of records) {
    for (const f of RECORD_FIELDS) assert.ok(f in rec, `${f} in ${JSON.stringify(rec)}`);
    assert.equal(rec.workload, 'W3');
    assert.equal(rec.unit, 'tasks/s');
    assert.equal(rec.better, 'higher');
    assert.equal(rec.run, 0);
    assert.ok(Number.isFinite(rec.value) && rec.value > 0, JSON.stringify(rec));
  }
  const impls = ['tensorproc processes', 'tensorproc threads', 'piscina (threads)'];
  if (findPythons().torch) impls.push('torch');
  assert.deepEqual([...new Set(records.map((x) => x.impl))].sort(), [...impls, 'fresh limit'].sort());
  for (const impl of impls) {
    // One trial of each case at the smoke counts, in order.
    assert.deepEqual(
      records.filter((x) => x.impl === impl).map((x) => [x.case, x.count]),
      CASES,
      impl,
    );
  }
  // The 1 MiB case's limit, measured beside it, shown as a share of it.
  assert.deepEqual(
    records.filter((x) => x.impl === 'fresh limit').map((x) => [x.case, x.count]),
    [CASES[2]],
  );

  const table = report(records);
  assert.match(table, /^### W3, tasks\/s \(higher is better; one run\)$/m);
  assert.match(table, /^\| 1 MiB tensor results +\| +tensorproc processes +\|.*\| +\d+% +\|/m, 'the fresh limit as a share');
  if (findPythons().torch) {
    for (const [c, bar] of [
      ['tiny, chunksize 1', '≥ 1\\.5x torch'],
      ['tiny, default chunksize', '≥ torch'],
      ['1 MiB tensor results', '≥ 10x torch'],
    ]) {
      // Cells are padded on either side (markdown-table aligns the columns).
      assert.match(
        table,
        new RegExp(
          `^\\| ${c} +\\| +tensorproc processes +\\|.*\\| +${bar} +\\| +(pass|BELOW) \\([\\d.]+x\\)(; out of reach: fresh limit [\\d.]+x)? +\\|$`,
          'm',
        ),
        c,
      );
    }
    // A verdict below the bar names the limit when the limit itself is below it and ours is
    // not above the limit (one trial each: the values are the medians).
    const value = (impl: string): number => records.find((x) => x.impl === impl && x.case === CASES[2]![0])!.value;
    const ours = value('tensorproc processes') / value('torch');
    const reach = value('fresh limit') / value('torch');
    const row = table.split('\n').find((l) => /^\| 1 MiB tensor results +\| +tensorproc processes /.test(l))!;
    assert.equal(/out of reach: fresh limit/.test(row), ours < 10 && reach < 10 && ours <= reach, row);
  }
});
