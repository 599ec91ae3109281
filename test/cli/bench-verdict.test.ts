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

test('W6 verdicts: from 1 MiB a case has two bars and passes only when both do', () => {
  const w6 = (impl: string, c: string, value: number): BenchRecord => ({
    workload: 'W6',
    impl,
    case: c,
    value,
    unit: 'msgs/s',
    better: 'higher',
    run: 0,
  });
  const line = (c: string, py: number, nn: number, sock: number): string => {
    const records = [
      w6('tensorproc file_descriptor', c, py),
      w6('Node -> Node file_descriptor', c, nn),
      w6('bytes over a Unix socket', c, sock),
    ];
    return report(records)
      .split('\n')
      .find((l) => new RegExp(`^\\| ${c} +\\| +tensorproc file_descriptor `).test(l))!;
  };
  assert.match(line('1 KiB', 800, 1_000, 5_000), /≥ 0\.7x Node -> Node +\| pass \(0\.800x\) +\|$/, 'one bar below 1 MiB');
  assert.match(line('1 MiB', 800, 1_000, 50), /≥ 0\.7x Node -> Node; ≥ 10x socket +\| pass \(0\.800x; 16\.0x\) +\|$/);
  assert.match(line('1 MiB', 800, 1_000, 100), /\| BELOW \(0\.800x; 8\.00x\) +\|$/, 'the socket bar alone fails it');
  assert.match(line('16 MiB', 600, 1_000, 10), /\| BELOW \(0\.600x; 60\.0x\) +\|$/, 'the Node -> Node bar alone fails it');
});
