// Medians over runs of one workload's records (NOTE [Bench records]), the ratios between
// implementations measured in the same run, verdicts against the bars, and how they print.
import { markdownTable } from 'markdown-table';
import type { BenchRecord } from './record.js';
import { median } from './stats.js';
import { barsFor, type CaseBar } from './verdicts.js';

/** Medians of one workload's records: impl -> case -> value. */
export class Medians {
  readonly impls: string[] = [];
  readonly cases: string[] = [];
  readonly runs: number;
  readonly unit: string;
  readonly better: 'higher' | 'lower';
  readonly #values = new Map<string, number[]>();
  readonly bytes = new Map<string, number>();

  constructor(records: BenchRecord[]) {
    for (const r of records) {
      if (!this.impls.includes(r.impl)) this.impls.push(r.impl);
      if (!this.cases.includes(r.case)) this.cases.push(r.case);
      const k = `${r.impl}\n${r.case}`;
      this.#values.set(k, [...(this.#values.get(k) ?? []), r.value]);
      if (r.bytes !== undefined) this.bytes.set(r.case, r.bytes);
    }
    this.runs = Math.max(1, ...records.map((r) => r.run + 1));
    this.unit = records[0]?.unit ?? '';
    this.better = records[0]?.better ?? 'higher';
  }

  get(impl: string, caseName: string): number | undefined {
    const xs = this.#values.get(`${impl}\n${caseName}`);
    return xs === undefined ? undefined : median(xs);
  }

  /** How many times as fast `impl` is as `other` on a case (a share, for a limit). */
  ratio(impl: string, other: string, caseName: string): number | undefined {
    const a = this.get(impl, caseName);
    const b = this.get(other, caseName);
    if (a === undefined || b === undefined || a === 0 || b === 0) return undefined;
    return this.better === 'higher' ? a / b : b / a;
  }
}

export const isOurs = (impl: string): boolean => impl.startsWith('tensorproc');
export const isLimit = (impl: string): boolean => impl.includes('limit');

/** A figure with as many digits as it needs: 37,357 / 83.7 / 0.104. */
export function fmtValue(x: number | undefined): string {
  if (x === undefined || !Number.isFinite(x)) return '–';
  const digits = x >= 100 ? 0 : x >= 10 ? 1 : x >= 1 ? 2 : 3;
  return x.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });
}

export const fmtRatio = (x: number | undefined): string => (x === undefined ? '–' : `${fmtValue(x)}x`);
export const fmtShare = (x: number | undefined): string => (x === undefined ? '–' : `${Math.round(100 * x)}%`);

/** The verdict of `impl` on a case against its bar, or '' where it has none. */
export function verdict(m: Medians, workload: string, impl: string, caseName: string): { bar: string; verdict: string } {
  const bars = barsFor(workload, caseName, impl);
  if (bars.length <= 1) return bars.length ? verdictOne(m, impl, caseName, bars[0]!) : { bar: '', verdict: '' };
  // Several bars (W6): the case passes when every one does; each figure is shown.
  const each = bars.map((b) => verdictOne(m, impl, caseName, b)).filter((v) => v.bar !== '');
  const pass = each.every((v) => v.verdict.startsWith('pass'));
  const figures = each.map((v) => v.verdict.replace(/^\w+ \((.*)\)$/, '$1')).join('; ');
  return { bar: each.map((v) => v.bar).join('; '), verdict: `${pass ? 'pass' : 'BELOW'} (${figures})` };
}

function verdictOne(m: Medians, impl: string, caseName: string, bar: CaseBar): { bar: string; verdict: string } {
  if (bar.atMost !== undefined) {
    // A figure judged as it is (W3 mixed's multiple of its own free worker), in its own unit only.
    const v = m.unit.startsWith('x ') ? m.get(impl, caseName) : undefined;
    if (v === undefined) return { bar: '', verdict: '' };
    return { bar: bar.text, verdict: `${v <= bar.atMost ? 'pass' : 'BELOW'} (${fmtRatio(v)})` };
  }
  const r = m.ratio(impl, bar.against, caseName);
  if (r === undefined) return { bar: bar.text, verdict: `– (no ${bar.against})` };
  const shown = isLimit(bar.against) ? fmtShare(r) : fmtRatio(r);
  if (r >= bar.atLeast) return { bar: bar.text, verdict: `pass (${shown})` };
  // A limit of the case measured in the same run that falls short of the bar itself: out of reach.
  // Only while ours is not above it: a limit our own figure beat in this run bounds nothing
  // (short --quick runs, a cache that happened to help), and the verdict must not lean on it.
  const limit = isLimit(bar.against) ? undefined : m.impls.find((i) => isLimit(i) && m.ratio(i, bar.against, caseName) !== undefined);
  const lr = limit === undefined ? undefined : m.ratio(limit, bar.against, caseName)!;
  const reach = lr !== undefined && lr < bar.atLeast && r <= lr ? `; out of reach: ${limit} ${fmtRatio(lr)}` : '';
  return { bar: bar.text, verdict: `BELOW (${shown})${reach}` };
}

export const table = (header: string[], rows: string[][]): string =>
  markdownTable([header, ...rows], { align: ['l', ...header.slice(1).map(() => 'r' as const)] });
