// The bars the yardstick's figures are judged by, so that every table can print each case's
// verdict beside its figure. W1: issue 14's "How it is judged" (YARDSTICK.md says how W1 is
// judged per size: against torch at the small sizes, same strategy, and as a share of the
// fill limit from 16 MiB, where no transport can beat writing the tensor once). W2: issue 9
// (tensorproc's spawn at most 1.1x the time of a bare child_process.fork; issue 3 had 1.3x).
// W3: issue 11. W6: issue 28 (two bars a case from 1 MiB: a case passes when both do).

export interface Bar {
  workload: string;
  case: string;
  /** Which of ours is judged ('tensorproc file_descriptor'); `{strategy}` for each strategy. */
  impl: string;
  /** Against whom: an anchor or a limit, `{strategy}` as in impl. */
  against: string;
  /** The least "times as fast" (a share, for a limit) that passes. */
  atLeast: number;
  /** Instead of `against` (then ''): the most the figure itself may be (a ratio the workload measured). */
  atMost?: number;
  /** The bar as a person reads it. */
  text: string;
}

const w1 = (bytes: string, against: string, atLeast: number, text: string): Bar => ({
  workload: 'W1',
  case: bytes,
  impl: 'tensorproc {strategy}',
  against,
  atLeast,
  text,
});

export const BARS: Bar[] = [
  w1('1 KiB', 'torch {strategy}', 20, '≥ 20x torch'),
  w1('64 KiB', 'torch {strategy}', 20, '≥ 20x torch'),
  w1('1 MiB', 'torch {strategy}', 10, '≥ 10x torch'),
  w1('16 MiB', 'fill limit', 0.85, '≥ 85% of fill limit'),
  w1('64 MiB', 'fill limit', 0.85, '≥ 85% of fill limit'),
  ...['N=2', 'N=4'].map(
    (n): Bar => ({
      workload: 'W2',
      case: n,
      impl: 'tensorproc spawn',
      against: 'child_process.fork',
      atLeast: 1 / 1.1,
      text: 'time ≤ 1.1x fork (≥ 0.91x as fast)',
    }),
  ),
  // W3: issue 11's bars, tensorproc's Pool of processes against torch's Pool.
  { workload: 'W3', case: 'tiny, chunksize 1', impl: 'tensorproc processes', against: 'torch', atLeast: 1.5, text: '≥ 1.5x torch' },
  { workload: 'W3', case: 'tiny, default chunksize', impl: 'tensorproc processes', against: 'torch', atLeast: 1, text: '≥ torch' },
  { workload: 'W3', case: '1 MiB tensor results', impl: 'tensorproc processes', against: 'torch', atLeast: 10, text: '≥ 10x torch' },
  // W3 mixed: each call against one free worker of the same pool, measured just before.
  ...['map, default chunksize', 'map, chunksize 1', 'imap'].map(
    (c): Bar => ({
      workload: 'W3mixed',
      case: c,
      impl: 'tensorproc processes',
      against: '',
      atLeast: 0,
      atMost: 1.5,
      text: '≤ 1.5x one free worker',
    }),
  ),
  // W6: Node -> Python against tensorproc's own Node -> Node (same strategy) and the socket copy.
  ...['1 KiB', '64 KiB', '1 MiB', '16 MiB', '64 MiB'].flatMap((c, i): Bar[] => [
    {
      workload: 'W6',
      case: c,
      impl: 'tensorproc {strategy}',
      against: 'Node -> Node {strategy}',
      atLeast: 0.7,
      text: '≥ 0.7x Node -> Node',
    },
    ...(i >= 2
      ? [{ workload: 'W6', case: c, impl: 'tensorproc {strategy}', against: 'bytes over a Unix socket', atLeast: 10, text: '≥ 10x socket' }]
      : []),
  ]),
];

/** The bar for `impl` on one case, with `{strategy}` filled in, if there is one. */
export function barFor(workload: string, caseName: string, impl: string): CaseBar | null {
  return barsFor(workload, caseName, impl)[0] ?? null;
}

export type CaseBar = { against: string; atLeast: number; atMost?: number; text: string };

/** Every bar for `impl` on one case (most cases have one; W6's larger ones two), `{strategy}` filled in. */
export function barsFor(workload: string, caseName: string, impl: string): CaseBar[] {
  const out: CaseBar[] = [];
  for (const b of BARS) {
    if (b.workload !== workload || b.case !== caseName) continue;
    if (b.impl === impl) out.push(b);
    const strategy = /^tensorproc (\w+)$/.exec(impl)?.[1];
    if (strategy !== undefined && b.impl === 'tensorproc {strategy}')
      out.push({ ...b, against: b.against.replace('{strategy}', strategy) });
  }
  return out;
}
