// W1's tables: messages/s of every implementation by size, then, for each strategy, what
// tensorproc does against each anchor and each limit measured in the same run, with the
// verdict of the bar for that size (verdicts.ts; YARDSTICK.md: print both the ratio to
// torch and the share of the fill limit everywhere).
import { fmtRatio, fmtShare, fmtValue, type Medians, table, verdict } from './medians.js';

const NODE = ['node fork', 'node worker-copy', 'node worker-transfer'];
const ORDER = [
  'tensorproc file_descriptor',
  'tensorproc file_system',
  'torch file_descriptor',
  'torch file_system',
  ...NODE,
  'fill limit',
  'fill limit, uncached',
  'message limit file_descriptor',
  'message limit file_system',
];

/** W1's implementations in the order of its tables and of the plot's legend: ours, torch, Node, the limits, then any other. */
export function w1Order(impls: readonly string[]): string[] {
  return [...ORDER.filter((i) => impls.includes(i)), ...impls.filter((i) => !ORDER.includes(i))];
}

export function w1Report(m: Medians): string {
  const runs = m.runs > 1 ? `median of ${m.runs} runs` : 'one run';
  const order = w1Order(m.impls);
  const sizes = m.cases;
  const figures = table(
    ['size', ...order],
    sizes.map((c) => [c, ...order.map((i) => fmtValue(m.get(i, c)))]),
  );
  const nodes = NODE.filter((i) => m.impls.includes(i));
  const rows: string[][] = [];
  for (const c of sizes) {
    for (const s of ['file_descriptor', 'file_system']) {
      const ours = `tensorproc ${s}`;
      const v = m.get(ours, c);
      if (v === undefined) continue;
      const bytes = m.bytes.get(c);
      const message = `message limit ${s}`;
      const { bar, verdict: word } = verdict(m, 'W1', ours, c);
      rows.push([
        c,
        s,
        fmtValue(v),
        bytes === undefined ? '–' : fmtValue((v * bytes) / 1e9),
        fmtRatio(m.ratio(ours, `torch ${s}`, c)),
        ...nodes.map((n) => fmtRatio(m.ratio(ours, n, c))),
        fmtShare(m.ratio(ours, 'fill limit', c)),
        fmtShare(m.ratio(ours, 'fill limit, uncached', c)),
        m.impls.includes(message) ? fmtShare(m.ratio(ours, message, c)) : '–',
        bar,
        word,
      ]);
    }
  }
  const header = [
    'size',
    'strategy',
    'msgs/s',
    'GB/s',
    'x torch (same strategy)',
    ...nodes.map((n) => `x ${n.slice(5)}`),
    'of fill limit',
    'of uncached fill limit',
    'of message limit',
    'bar',
    'verdict',
  ];
  return [
    `### W1, one producer → one consumer process, messages/s (consumer side; ${runs})`,
    figures,
    'W1, tensorproc against the anchors ("x": times as many messages/s) and the limits (the share reached), in the same run',
    table(header, rows),
  ].join('\n\n');
}
