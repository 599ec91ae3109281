// Verdicts against a bar that a limit measured in the same run puts out of reach (NOTE [Bench
// records]; bench/lib/medians.ts verdict()): over made-up W3 records, so that every branch is
// judged whatever this machine measures. A limit our own figure beat bounds nothing, and the
// verdict must not name it (a --quick run once printed "out of reach: fresh limit 2.34x" beside
// our 2.44x).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { BenchRecord } from '../../bench/lib/record.js';
import { report } from '../../bench/lib/report.js';
import { checkLeaks } from '../helpers/leaks.js';

checkLeaks();

const CASE = '1 MiB tensor results';
const rec = (impl: string, value: number): BenchRecord => ({
  workload: 'W3',
  impl,
  case: CASE,
  value,
  unit: 'tasks/s',
  better: 'higher',
  run: 0,
});
const row = (ours: number, torch: number, limit: number): string => {
  const table = report([rec('tensorproc processes', ours), rec('torch', torch), rec('fresh limit', limit)]);
  return table.split('\n').find((l) => new RegExp(`^\\| ${CASE} +\\| +tensorproc processes `).test(l))!;
};

test('W3 1 MiB verdicts: out of reach only by a limit below the bar that ours did not beat', () => {
  assert.match(row(466, 607, 1_100), /\| BELOW \(0\.768x\); out of reach: fresh limit 1\.81x +\|$/, 'limit below 10x torch, ours below it');
  assert.match(row(1_200, 607, 1_100), /\| BELOW \(1\.98x\) +\|$/, 'ours above the limit: the limit bounds nothing');
  assert.match(row(466, 607, 7_000), /\| BELOW \(0\.768x\) +\|$/, 'the limit allows the bar: plainly below');
  assert.match(row(7_000, 607, 8_000), /\| pass \(11\.5x\) +\|$/);
});
