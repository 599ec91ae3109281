// `tensorproc bench --plot FILE.svg`: W1's messages/s against the tensor's size, one line per
// implementation (the limits dashed), both axes logarithmic. Drawn by vega-lite compiled to
// vega and rendered headless to SVG (renderer 'none': no canvas, no browser). Both are
// devDependencies, imported only here: an installed package without them says how to get
// them instead of carrying a charting library for every user of tensors.
import { writeFileSync } from 'node:fs';
import { PlotNeedsW1Error, PlotUnavailableError } from './errors.js';
import { Medians } from './medians.js';
import type { BenchRecord } from './record.js';
import { w1Order } from './w1-report.js';

export interface Point {
  impl: string;
  bytes: number;
  size: string;
  msgs_per_s: number;
  limit: boolean;
}

/** W1's medians as points, one series per implementation. */
export function plotPoints(records: BenchRecord[]): Point[] {
  const m = new Medians(records.filter((r) => r.workload === 'W1' && r.bytes !== undefined));
  return m.impls.flatMap((impl) =>
    m.cases.flatMap((c) => {
      const v = m.get(impl, c);
      const bytes = m.bytes.get(c);
      return v === undefined || bytes === undefined ? [] : [{ impl, bytes, size: c, msgs_per_s: v, limit: impl.includes('limit') }];
    }),
  );
}

/** The vega-lite specification of the plot. */
export function plotSpec(points: Point[], title: string): Record<string, unknown> {
  const ticks = [...new Set(points.map((p) => p.bytes))].sort((a, b) => a - b);
  // The legend in the order of W1's tables: ours first, then torch, Node, the limits.
  const impls = w1Order([...new Set(points.map((p) => p.impl))]);
  const labels = Object.fromEntries(points.map((p) => [p.bytes, p.size]));
  return {
    $schema: 'https://vega.github.io/schema/vega-lite/v5.json',
    title,
    width: 560,
    height: 360,
    background: 'white',
    data: { values: points },
    mark: { type: 'line', point: true },
    encoding: {
      x: {
        field: 'bytes',
        type: 'quantitative',
        title: 'tensor size',
        scale: { type: 'log' },
        axis: { values: ticks, labelExpr: `${JSON.stringify(labels)}[datum.value] || datum.label` },
      },
      y: { field: 'msgs_per_s', type: 'quantitative', title: 'messages/s (consumer side)', scale: { type: 'log' } },
      color: { field: 'impl', type: 'nominal', title: 'implementation', scale: { domain: impls }, legend: { labelLimit: 260 } },
      strokeDash: {
        field: 'limit',
        type: 'nominal',
        legend: null,
        scale: {
          domain: [false, true],
          range: [
            [1, 0],
            [5, 3],
          ],
        },
      },
      tooltip: [{ field: 'impl' }, { field: 'size' }, { field: 'msgs_per_s', format: ',.0f' }],
    },
  };
}

/** The charting libraries, or what to install: checked before a run, not after it. */
export async function chartingLibraries(): Promise<{ vega: typeof import('vega'); vl: typeof import('vega-lite') }> {
  try {
    return { vega: await import('vega'), vl: await import('vega-lite') };
  } catch (e) {
    throw new PlotUnavailableError(
      `--plot needs the charting libraries vega and vega-lite (devDependencies of tensorproc): npm install vega@5 vega-lite@5 (${(e as Error).message})`,
      { cause: e },
    );
  }
}

/** Renders the plot of `records` to an SVG file; resolves to the number of series drawn. */
export async function writePlot(records: BenchRecord[], file: string, title: string): Promise<number> {
  const { vega, vl } = await chartingLibraries();
  const points = plotPoints(records);
  if (points.length === 0) throw new PlotNeedsW1Error('--plot draws W1, and W1 measured nothing in this run');
  const spec = vl.compile(plotSpec(points, title) as unknown as Parameters<typeof vl.compile>[0]).spec;
  const view = new vega.View(vega.parse(spec), { renderer: 'none' });
  const svg = await view.toSVG();
  view.finalize();
  writeFileSync(file, svg);
  return new Set(points.map((p) => p.impl)).size;
}
