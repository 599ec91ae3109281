// The tables at the end of a bench run, from its records (NOTE [Bench records]): per
// workload, the medians over runs of every implementation side by side, then each of ours
// as "times as fast as" each anchor measured in the same run, with the limits as shares and
// each case's verdict against its bar (verdicts.ts). W1 has tables of its own (w1-report.ts).
import { fmtRatio, fmtShare, fmtValue, isLimit, isOurs, Medians, table, verdict } from './medians.js';
import type { BenchRecord } from './record.js';
import { w1Report } from './w1-report.js';

function genericReport(workload: string, m: Medians): string {
  const order = [...m.impls.filter(isOurs), ...m.impls.filter((i) => !isOurs(i) && !isLimit(i)), ...m.impls.filter(isLimit)];
  const runs = m.runs > 1 ? `median of ${m.runs} runs` : 'one run';
  const parts = [
    `### ${workload}, ${m.unit} (${m.better} is better; ${runs})`,
    table(
      ['case', ...order],
      m.cases.map((c) => [c, ...order.map((i) => fmtValue(m.get(i, c)))]),
    ),
  ];
  const anchors = order.filter((i) => !isOurs(i));
  const ours = order.filter(isOurs);
  if (ours.length && anchors.length) {
    const rows = m.cases.flatMap((c) =>
      ours
        .filter((o) => m.get(o, c) !== undefined)
        .map((o) => {
          const v = verdict(m, workload, o, c);
          return [c, o, ...anchors.map((a) => (isLimit(a) ? fmtShare : fmtRatio)(m.ratio(o, a, c))), v.bar, v.verdict];
        }),
    );
    // Bar and verdict columns only for a workload that has bars.
    const judged = rows.some((r) => r[r.length - 2] !== '');
    const header = ['case', 'ours', ...anchors, ...(judged ? ['bar', 'verdict'] : [])];
    parts.push(
      `${workload}, times as fast as each anchor in the same run (a limit: the share reached)`,
      table(header, judged ? rows : rows.map((r) => r.slice(0, -2))),
    );
  }
  return parts.join('\n\n');
}

const ORDER = ['W1', 'W2', 'W3', 'W3mixed', 'W4'];

/** Every workload's tables, W1-W4 first, as markdown (a workload with two units: a table each). */
export function report(records: BenchRecord[]): string {
  const rank = (w: string): number => ORDER.indexOf(w) + 1 || 99;
  const workloads = [...new Set(records.map((r) => r.workload))].sort((a, b) => rank(a) - rank(b));
  return workloads
    .flatMap((w) => {
      const mine = records.filter((r) => r.workload === w);
      return [...new Set(mine.map((r) => r.unit))].map((unit) => {
        const m = new Medians(mine.filter((r) => r.unit === unit));
        return w === 'W1' ? w1Report(m) : genericReport(w, m);
      });
    })
    .join('\n\n');
}

export function printReport(records: BenchRecord[]): void {
  console.log(`\n${report(records)}\n`);
}
