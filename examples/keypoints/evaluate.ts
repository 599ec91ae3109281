// Peak finding (the seed's HeatmapParser and get_final_preds, one figure per image) and the
// accuracy of the predictions against the keypoints the dataset placed (test_dataset.evaluate:
// COCO's OKS-based AP and AR, plus PCK and the mean error in pixels).
import { STRIDE } from './config.js';

/** Per joint: x, y in input pixels, and the peak's value as its score. */
export type Prediction = Float32Array;

/**
 * The maximum of each heatmap, moved a quarter pixel towards its higher neighbour on each
 * axis (as get_final_preds refines it), mapped from output to input pixels.
 */
export function findPeaks(heat: Float32Array, joints: number, side: number): { preds: Prediction; score: number } {
  const preds = new Float32Array(joints * 3);
  let total = 0;
  const plane = side * side;
  for (let j = 0; j < joints; j++) {
    let best = -Infinity;
    let at = 0;
    for (let p = 0; p < plane; p++) {
      const v = heat[j * plane + p]!;
      if (v > best) {
        best = v;
        at = p;
      }
    }
    const y = Math.floor(at / side),
      x = at % side;
    const h = (xx: number, yy: number): number => heat[j * plane + yy * side + xx]!;
    let fx = x,
      fy = y;
    if (x > 0 && x < side - 1) fx += 0.25 * Math.sign(h(x + 1, y) - h(x - 1, y));
    if (y > 0 && y < side - 1) fy += 0.25 * Math.sign(h(x, y + 1) - h(x, y - 1));
    preds[3 * j] = (fx + 0.5) * STRIDE - 0.5;
    preds[3 * j + 1] = (fy + 0.5) * STRIDE - 0.5;
    preds[3 * j + 2] = best;
    total += best;
  }
  return { preds, score: total / joints };
}

export interface Result {
  preds: Prediction;
  score: number;
  /** [K, 3] x, y, visibility. */
  truth: Float32Array;
  area: number;
}

/** COCO's object keypoint similarity, one constant σ for every joint. */
function oks(r: Result, joints: number, sigma: number): number {
  let sum = 0;
  let n = 0;
  const k2 = (2 * sigma) ** 2;
  for (let j = 0; j < joints; j++) {
    if (r.truth[3 * j + 2] === 0) continue;
    const d2 = (r.preds[3 * j]! - r.truth[3 * j]!) ** 2 + (r.preds[3 * j + 1]! - r.truth[3 * j + 1]!) ** 2;
    sum += Math.exp(-d2 / (2 * r.area * k2));
    n++;
  }
  return n === 0 ? 0 : sum / n;
}

/** AP at one OKS threshold: detections by score, 101-point interpolated precision (COCOeval). */
function averagePrecision(sims: readonly number[], order: readonly number[], threshold: number): { ap: number; recall: number } {
  const n = sims.length;
  const precision: number[] = [];
  const recall: number[] = [];
  let tp = 0;
  order.forEach((i, rank) => {
    if (sims[i]! >= threshold) tp++;
    precision.push(tp / (rank + 1));
    recall.push(tp / n);
  });
  for (let i = precision.length - 2; i >= 0; i--) precision[i] = Math.max(precision[i]!, precision[i + 1]!);
  let ap = 0;
  let k = 0;
  for (let t = 0; t <= 100; t++) {
    while (k < recall.length && recall[k]! < t / 100) k++;
    ap += k < precision.length ? precision[k]! : 0;
  }
  return { ap: ap / 101, recall: tp / n };
}

/** The name → value table the seed prints: AP and AR over OKS .50:.05:.95, at .5 and .75, PCK@0.1 and the mean error. */
export function evaluate(results: readonly Result[], joints: number, sigma: number): Record<string, number> {
  const sims = results.map((r) => oks(r, joints, sigma));
  const order = results.map((_, i) => i).sort((a, b) => results[b]!.score - results[a]!.score);
  const thresholds = Array.from({ length: 10 }, (_, i) => 0.5 + 0.05 * i);
  const at = thresholds.map((t) => averagePrecision(sims, order, t));
  let hits = 0,
    seen = 0,
    err = 0;
  for (const r of results) {
    const ref = Math.sqrt(r.area);
    for (let j = 0; j < joints; j++) {
      if (r.truth[3 * j + 2] === 0) continue;
      const d = Math.hypot(r.preds[3 * j]! - r.truth[3 * j]!, r.preds[3 * j + 1]! - r.truth[3 * j + 1]!);
      if (d <= 0.1 * ref) hits++;
      err += d;
      seen++;
    }
  }
  const mean = (xs: number[]): number => xs.reduce((a, b) => a + b, 0) / xs.length;
  return {
    AP: mean(at.map((x) => x.ap)),
    'Ap .5': at[0]!.ap,
    'AP .75': at[5]!.ap,
    AR: mean(at.map((x) => x.recall)),
    'AR .5': at[0]!.recall,
    'PCK@0.1': seen === 0 ? 0 : hits / seen,
    'Err (px)': seen === 0 ? 0 : err / seen,
  };
}

/** The seed's _print_name_value: a markdown table of one row, an arch name over 15 characters shortened to 8 and '...'. */
export function formatNameValue(nameValue: Record<string, number>, fullArchName: string): string[] {
  const names = Object.keys(nameValue);
  const values = Object.values(nameValue);
  const arch = fullArchName.length > 15 ? `${fullArchName.slice(0, 8)}...` : fullArchName;
  return [
    `| Arch ${names.map((n) => `| ${n}`).join(' ')} |`,
    `${'|---'.repeat(names.length + 1)}|`,
    `| ${arch} ${values.map((v) => `| ${v.toFixed(3)}`).join(' ')} |`,
  ];
}
