// pytorch/examples' mnist_hogwild, ported: one model whose parameters live in shared memory
// (torch: model.share_memory()), N processes that train it in place without locks (Hogwild),
// joined, then tested in the main process. The model is a softmax regression on synthetic
// data (the same in every process, from a seed), so that the example needs no download.
//
//   node dist/examples/hogwild.js [--processes 4] [--json]    (or: npx tsx examples/hogwild.ts)
//
// One file: the children import this module for `train`, and the main code is guarded so
// that they do not run it (torch: `if __name__ == '__main__'`).
import * as mp from 'tensorproc';

const FEATURES = 20;
const CLASSES = 3;
const SAMPLES = 3000;

interface Data {
  xs: Float64Array[];
  ys: number[];
}

/** Samples whose class is the argmax of a random linear map, from a linear congruential generator. */
function makeData(seed: number): Data {
  let s = seed >>> 0;
  const rnd = (): number => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 2 ** 32) * 2 - 1;
  const truth = Float64Array.from({ length: CLASSES * FEATURES }, rnd);
  const xs: Float64Array[] = [];
  const ys: number[] = [];
  for (let n = 0; n < SAMPLES; n++) {
    const x = Float64Array.from({ length: FEATURES }, rnd);
    xs.push(x);
    ys.push(argmax(logits(truth, null, x)));
  }
  return { xs, ys };
}

function logits(w: ArrayLike<number>, b: ArrayLike<number> | null, x: Float64Array): number[] {
  const z: number[] = [];
  for (let c = 0; c < CLASSES; c++) {
    let v = b === null ? 0 : b[c]!;
    for (let d = 0; d < FEATURES; d++) v += w[c * FEATURES + d]! * x[d]!;
    z.push(v);
  }
  return z;
}

const argmax = (z: number[]): number => z.indexOf(Math.max(...z));

/** torch's train(rank, args, model, ...): SGD on every processes-th sample, into the shared parameters. */
export function train(rank: number, processes: number, weight: mp.Tensor, bias: mp.Tensor, epochs: number, lr: number): void {
  const { xs, ys } = makeData(1);
  const w = weight.data as Float32Array;
  const b = bias.data as Float32Array;
  for (let epoch = 0; epoch < epochs; epoch++) {
    for (let n = rank; n < SAMPLES; n += processes) {
      const z = logits(w, b, xs[n]!);
      const m = Math.max(...z);
      const e = z.map((v) => Math.exp(v - m));
      const sum = e.reduce((a, v) => a + v, 0);
      for (let c = 0; c < CLASSES; c++) {
        const g = e[c]! / sum - (ys[n] === c ? 1 : 0);
        b[c] -= lr * g;
        for (let d = 0; d < FEATURES; d++) w[c * FEATURES + d] -= lr * g * xs[n]![d]!;
      }
    }
  }
}

function accuracy(weight: mp.Tensor, bias: mp.Tensor): number {
  const { xs, ys } = makeData(1);
  let right = 0;
  for (let n = 0; n < SAMPLES; n++) if (argmax(logits(weight.data as Float32Array, bias.data as Float32Array, xs[n]!)) === ys[n]) right++;
  return right / SAMPLES;
}

async function main(processes: number, json: boolean): Promise<void> {
  const weight = mp.zeros([CLASSES, FEATURES]).shareMemory(); // model.share_memory()
  const bias = mp.zeros([CLASSES]).shareMemory();
  const before = accuracy(weight, bias);
  const children: mp.Process[] = [];
  for (let rank = 0; rank < processes; rank++) {
    const p = new mp.Process({ target: { module: import.meta.url, export: 'train' }, args: [rank, processes, weight, bias, 5, 0.05] });
    p.start();
    children.push(p);
  }
  for (const p of children) await p.join();
  const report = { processes, exitCodes: children.map((p) => p.exitCode), before, after: accuracy(weight, bias) };
  if (json) console.log(JSON.stringify(report));
  else
    console.log(
      `${processes} processes trained the shared model: accuracy ${(100 * before).toFixed(1)}% before, ${(100 * report.after).toFixed(1)}% after (exit codes ${report.exitCodes.join(', ')})`,
    );
  if (report.exitCodes.some((c) => c !== 0)) process.exitCode = 1;
}

if (mp.parentProcess() === null) {
  const at = process.argv.indexOf('--processes');
  await main(at > 0 ? Number(process.argv[at + 1]) : 4, process.argv.includes('--json'));
}
