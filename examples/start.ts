// `npm start`: the job tensorproc exists for, on an embedded default. First the seed's
// evaluation program (examples/evaluate.ts) on examples/configs/keypoints.yaml: a DataLoader
// whose workers render images while the main process runs the model on them. Then W4 of the
// yardstick: the DataLoader with 0 and with 2 workers on 40 batches of 32 3x224x224 images,
// two epochs each (median of three runs), beside PyTorch's figures on this kind of machine.
import { fileURLToPath } from 'node:url';
import { markdownTable, median } from '../bench/lib/stats.js';
import { W4, w4Trial, type W4Trial } from '../bench/lib/w4.js';
import { configFrom, run } from './evaluate.js';
import { progress } from './progress.js';

const RUNS = 3;
const WORKER_COUNTS = [0, 2];
/** torch 1.13.1's DataLoader on W4, shared/YARDSTICK.md (2026-12-01, 2-core machines). */
const TORCH: Record<number, [number, number]> = { 0: [273, 273], 2: [30, 65] };

const cfgFile = fileURLToPath(new URL('../../examples/configs/keypoints.yaml', import.meta.url));
console.log(`## 1. The seed's evaluation program: node dist/examples/evaluate.js --cfg examples/configs/keypoints.yaml\n`);
await run(configFrom(['--cfg', cfgFile]));

console.log(
  `\n## 2. W4: the DataLoader, ${W4.batches} batches of ${W4.batchSize} 3x224x224 float32 images, 0 and 2 workers (median of ${RUNS})\n`,
);
const bar = progress('W4 |{bar}| {value}/{total} batches  {what}', RUNS * WORKER_COUNTS.length * 2 * W4.batches, { what: '' });
const trials: W4Trial[] = [];
for (let r = 0; r < RUNS; r++) {
  for (const workers of WORKER_COUNTS) {
    trials.push(await w4Trial(workers, 0, () => bar.increment({ what: `${workers} workers, run ${r + 1}` })));
  }
}
bar.stop();
const med = (workers: number, epoch: 0 | 1): number => median(trials.filter((t) => t.workers === workers).map((t) => t.epochs[epoch]));
const rows = WORKER_COUNTS.map((workers) => [`tensorproc, ${workers} workers`, med(workers, 0).toFixed(0), med(workers, 1).toFixed(0)]);
rows.push(
  ...WORKER_COUNTS.map((workers) => [
    `torch 1.13, ${workers} workers (YARDSTICK.md)`,
    String(TORCH[workers]![0]),
    String(TORCH[workers]![1]),
  ]),
);
console.log(`\n${markdownTable(['DataLoader', 'epoch 1 (with start-up), batches/s', 'epoch 2, batches/s'], rows)}`);
const speedup = med(2, 1) / med(0, 1);
console.log(
  `\n2 workers against 0, epoch 2: ${speedup.toFixed(2)}x here; torch's: ${(TORCH[2]![1] / TORCH[0]![1]).toFixed(2)}x (its workers copy every batch into a new shared segment).`,
);
console.log(
  "torch's figures are from a quiet machine; for a comparison in one run, with the torch anchor measured beside: node dist/bench/data.js",
);
