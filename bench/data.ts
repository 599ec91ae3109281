// W4 (shared/YARDSTICK.md): the DataLoader, 40 batches of 32 3x224x224 float32 samples, each
// written in full in the worker; epoch 1 with worker start-up, epoch 2 with persistent
// workers. tensorproc beside torch's DataLoader (bench/anchors/torch-dataloader.py, Debian's
// python3 with torch) in one run, rounds interleaved so that machine noise hits both alike;
// then the same with about 1 ms of work per sample, once more with the samples left to the
// garbage collector (no releaseSamples: NOTE [Releasing samples]), and two limits: the fill limit (one core
// writing each batch once) for epoch 2, and for epoch 1 the start-up floor (two Node
// processes importing tensorproc at once, as the two workers do before their first batch).
// One JSON line per trial, then markdown tables of medians, ratios and the bars' verdicts.
//
//   node dist/bench/data.js [runs=5]
import { spawn, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import * as mp from 'tensorproc';
import { findPythons } from './lib/programs.js';
import { markdownTable, median } from './lib/stats.js';
import { benchEnv } from './lib/workload.js';
import { W4, w4Trial } from './lib/w4.js';

// Under `tensorproc bench` (NOTE [Bench records]): one round a run, --quick one round.
const env = benchEnv();
const runs = env.underRunner ? (env.quick ? 1 : 3) * env.runs : Number(process.argv[2] ?? 5);
const WORKERS = [0, 2];
const WORK_MS = 1;
// No fallback: findPythons() has looked at /usr/bin/python3, and none means torch is not measured.
const PYTHON = process.env.TENSORPROC_TORCH_PYTHON ?? findPythons().torch?.path ?? '';
const anchor = fileURLToPath(new URL('../../bench/anchors/torch-dataloader.py', import.meta.url));

type Key = string; // `${impl}|${workers}|${workMs}`
const results = new Map<Key, [number[], number[]]>();
function record(impl: string, workers: number, workMs: number, epochs: readonly number[]): void {
  const key = `${impl}|${workers}|${workMs}`;
  const r = results.get(key) ?? [[], []];
  r[0].push(epochs[0]!);
  r[1].push(epochs[1]!);
  results.set(key, r);
}

/** One torch round: a Python process running the anchor for these worker counts. null without torch. */
function torchRound(workMs: number, run: number): boolean {
  if (!existsSync(PYTHON) || !existsSync(anchor)) return false;
  const r = spawnSync(PYTHON, [anchor, '0,2', String(workMs)], { encoding: 'utf8' });
  if (r.status !== 0) {
    if (run === 0) console.error(`torch anchor unavailable (${PYTHON}): ${(r.stderr || r.error?.message || '').trim().split('\n').pop()}`);
    return false;
  }
  const byWorkers = new Map<number, number[]>();
  for (const line of r.stdout.split('\n').filter(Boolean)) {
    const o = JSON.parse(line) as { impl: string; workers: number; epoch: number; batches_per_s: number };
    console.log(JSON.stringify({ ...o, run }));
    (byWorkers.get(o.workers) ?? byWorkers.set(o.workers, []).get(o.workers)!)[o.epoch - 1] = o.batches_per_s;
  }
  for (const [w, e] of byWorkers) record('torch', w, workMs, e);
  return true;
}

/** The fill limit: batches/s of one core writing a (recycled, shared) batch-sized tensor once. */
function fillLimit(): number {
  const t = mp.empty([W4.batchSize, 3, 224, 224], { shared: true });
  t.fill(0);
  const reps = 20;
  const t0 = performance.now();
  for (let i = 0; i < reps; i++) t.fill(i / reps);
  const dt = (performance.now() - t0) / 1000;
  t.release();
  return reps / dt;
}

/** The start-up floor: ms until two Node processes that import tensorproc, started at once, have both exited. */
async function importFloor(): Promise<number> {
  const entry = import.meta.resolve('tensorproc'); // the package entry, as the workers load it
  const one = () =>
    new Promise<void>((resolve, reject) => {
      spawn(process.execPath, ['--input-type=module', '-e', `await import(${JSON.stringify(entry)})`], { stdio: 'inherit' })
        .on('error', reject)
        .on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`importing tensorproc exited with ${code}`))));
    });
  const t0 = performance.now();
  await Promise.all([one(), one()]);
  return performance.now() - t0;
}

let haveTorch = true;
const fills: number[] = [];
const floors: number[] = [];
const firstBatch: number[] = []; // ms from a new 2-worker loader to its first batch (epoch 1)
for (let r = 0; r < runs; r++) {
  for (const workMs of [0, WORK_MS]) {
    if (haveTorch && workMs === 0) haveTorch = torchRound(workMs, r);
    for (const workers of WORKERS) {
      const t0 = performance.now();
      let first = -1;
      const t = await w4Trial(workers, workMs, () => {
        if (first < 0) first = performance.now() - t0;
      });
      if (workers === 2 && workMs === 0) firstBatch.push(first);
      for (const e of [0, 1])
        console.log(
          JSON.stringify({
            workload: 'W4',
            impl: 'tensorproc',
            workers,
            work_ms: workMs,
            epoch: e + 1,
            run: r,
            batches_per_s: +t.epochs[e]!.toFixed(1),
          }),
        );
      record('tensorproc', workers, workMs, t.epochs);
    }
  }
  // The same loader with the samples left to the garbage collector (no releaseSamples).
  const gc = await w4Trial(2, 0, undefined, false);
  for (const e of [0, 1])
    console.log(
      JSON.stringify({
        workload: 'W4',
        impl: 'tensorproc, samples to the collector',
        workers: 2,
        work_ms: 0,
        epoch: e + 1,
        run: r,
        batches_per_s: +gc.epochs[e]!.toFixed(1),
      }),
    );
  record('tensorproc, samples to the collector', 2, 0, gc.epochs);
  fills.push(fillLimit());
  floors.push(await importFloor());
}

const med = (impl: string, w: number, workMs: number, e: 0 | 1): number | undefined => {
  const r = results.get(`${impl}|${w}|${workMs}`);
  return r ? median(r[e]) : undefined;
};
const fmt = (x: number | undefined, d = 0): string => (x === undefined ? '-' : x.toFixed(d));
const ratio = (a: number | undefined, b: number | undefined): string =>
  a === undefined || b === undefined ? '-' : `${(a / b).toFixed(2)}x`;

console.log(`\nW4, batches/s (median of ${runs}; ratio to torch with as many workers, same run)\n`);
const rows: string[][] = [];
for (const impl of ['torch', 'tensorproc', 'tensorproc, samples to the collector']) {
  for (const w of [0, 2]) {
    const e1 = med(impl, w, 0, 0),
      e2 = med(impl, w, 0, 1);
    if (e1 === undefined) continue;
    rows.push([
      impl.startsWith('tensorproc,') ? `tensorproc ${w} workers${impl.slice(10)}` : `${impl} ${w} workers`,
      fmt(e1),
      impl === 'torch' ? '' : ratio(e1, med('torch', w, 0, 0)),
      fmt(e2),
      impl === 'torch' ? '' : ratio(e2, med('torch', w, 0, 1)),
    ]);
  }
}
rows.push(['fill limit (1 core, each batch written once)', '', '', fmt(median(fills)), '']);
console.log(markdownTable(['loader', 'epoch 1', 'ratio', 'epoch 2', 'ratio'], rows));

console.log(`\nWorkers against none, epoch 2 (light dataset; and ${WORK_MS} ms of work per sample)\n`);
const speedRows: string[][] = [];
for (const impl of ['torch', 'tensorproc']) {
  const light = ratio(med(impl, 2, 0, 1), med(impl, 0, 0, 1));
  const heavy = ratio(med(impl, 2, WORK_MS, 1), med(impl, 0, WORK_MS, 1));
  speedRows.push([impl, fmt(med(impl, 0, WORK_MS, 1), 1), fmt(med(impl, 2, WORK_MS, 1), 1), light, heavy]);
}
console.log(
  markdownTable(
    [
      'loader',
      `0 workers, ${WORK_MS} ms/sample`,
      `2 workers, ${WORK_MS} ms/sample`,
      '2 vs 0 workers, light',
      `2 vs 0 workers, ${WORK_MS} ms/sample`,
    ],
    speedRows,
  ),
);
// The bars' verdicts, each beside the limit that bounds it on this machine (same run).
const e1 = med('tensorproc', 2, 0, 0),
  e2 = med('tensorproc', 2, 0, 1);
const t1 = med('torch', 2, 0, 0),
  t2 = med('torch', 2, 0, 1);
const verdict = (ours: number | undefined, theirs: number | undefined, bar: number): string =>
  ours === undefined || theirs === undefined
    ? 'no torch anchor'
    : `${(ours / theirs).toFixed(2)}x torch, bar ${bar}x: ${ours / theirs >= bar ? 'met' : 'NOT met'}`;
console.log(`\nBars (issue 12), 2 workers, medians of ${runs}:`);
console.log(
  `- epoch 2: ${fmt(e2)} batches/s, ${verdict(e2, t2, 4)}; the fill limit: ${fmt(median(fills))} batches/s (one core writing each batch once; a worker writes each sample, then copies it into its row)`,
);
console.log(
  `- epoch 1: ${fmt(e1)} batches/s, ${verdict(e1, t1, 5)}; first batch after ${fmt(median(firstBatch))} ms, of which the floor is ${fmt(median(floors))} ms (two Node processes importing tensorproc at once)`,
);
console.log(
  'Goals: 2 workers no slower than 0 on the light dataset (torch: 4x slower), at least 1.8x faster with about 1 ms of work per sample.',
);
