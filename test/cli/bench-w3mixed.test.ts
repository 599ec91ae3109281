// W3 mixed under `tensorproc bench` (YARDSTICK.md, added 2026-12-04): --quick --json --only
// W3mixed prints, for both of tensorproc's start methods and for CPython's Pool, the free
// worker's time and each case's, in ms, and each case as a multiple of that free worker's;
// the report judges tensorproc's processes against 1.5x. Figures are not judged here.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { BenchRecord } from '../../bench/lib/record.js';
import { report } from '../../bench/lib/report.js';
import { checkLeaks } from '../helpers/leaks.js';

checkLeaks();
const cli = fileURLToPath(new URL('../../src/cli/main.js', import.meta.url));
const CASES = ['map, default chunksize', 'map, chunksize 1', 'imap'];

test('bench --quick --json --only W3mixed: each case in ms and as a multiple of one free worker, with a verdict', () => {
  const r = spawnSync(process.execPath, [cli, 'bench', '--quick', '--json', '--only', 'W3mixed'], {
    encoding: 'utf8',
    timeout: 240_000,
    env: { ...process.env, TENSORPROC_BENCH_SMOKE: '1' },
  });
  assert.equal(r.status, 0, r.stderr);
  const records = r.stdout
    .trimEnd()
    .split('\n')
    .map((l) => JSON.parse(l) as BenchRecord)
    .filter((x) => 'value' in x);
  for (const impl of ['tensorproc processes', 'tensorproc threads', 'CPython']) {
    const mine = records.filter((x) => x.impl === impl);
    assert.deepEqual(
      mine.filter((x) => x.unit === 'ms').map((x) => x.case),
      ['one free worker', ...CASES],
      impl,
    );
    assert.deepEqual(
      mine.filter((x) => x.unit === 'x one free worker').map((x) => x.case),
      CASES,
      impl,
    );
    for (const x of mine) assert.ok(Number.isFinite(x.value) && x.value > 0, JSON.stringify(x));
  }
  const table = report(records);
  for (const c of CASES)
    assert.match(table, new RegExp(`^\\| ${c} +\\| +tensorproc processes +\\|.*≤ 1.5x one free worker +\\| +(pass|BELOW) \\(`, 'm'));
});
