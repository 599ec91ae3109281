// W3 anchor (YARDSTICK.md) for what a Node user has without tensorproc: piscina 5, a pool of
// 2 worker threads, warmed with 100 tiny tasks. Then, TRIALS times: TINY tiny tasks
// (x -> x * x), one run() each (piscina has no map and no chunksize); DEFAULT tiny tasks in
// chunks the size CPython's map would make (ceil(n / (4 x 2))), a run() per chunk mapping it;
// TENSOR tasks that each return a fresh 1 MiB Float32Array, filled (structured clone, as
// piscina returns values). The yardstick's counts: 20,000, 200,000 and 500. One JSON line
// per measurement.
//
//   node piscina-pool.js TRIALS [TINY DEFAULT TENSOR]
import { isMainThread } from 'node:worker_threads';
import { fileURLToPath } from 'node:url';
import { Piscina } from 'piscina';

export function square(x: number): number {
  return x * x;
}

export function squareChunk(xs: number[]): number[] {
  return xs.map(square);
}

export function freshArray(i: number): Float32Array {
  const t = new Float32Array(1 << 18);
  t.fill(i);
  return t;
}

function emit(impl: string, caseName: string, tasks: number, ms: number): void {
  console.log(JSON.stringify({ impl, case: caseName, tasks, tasks_per_s: tasks / (ms / 1000) }));
}

async function main(): Promise<void> {
  const trials = Number(process.argv[2] ?? 1);
  const [tiny, n, tensors] =
    process.argv.length > 5 ? (process.argv.slice(3, 6).map(Number) as [number, number, number]) : [20_000, 200_000, 500];
  const impl = 'piscina (threads)';
  const pool = new Piscina({ filename: fileURLToPath(import.meta.url), minThreads: 2, maxThreads: 2 });
  const range = (n: number): number[] => Array.from({ length: n }, (_, i) => i);
  await Promise.all(range(100).map((i) => pool.run(i, { name: 'square' })));
  for (let t = 0; t < trials; t++) {
    {
      const items = range(tiny);
      const t0 = performance.now();
      const out = (await Promise.all(items.map((i) => pool.run(i, { name: 'square' })))) as number[];
      emit(impl, 'tiny, chunksize 1', tiny, performance.now() - t0);
      if (out[tiny - 1] !== (tiny - 1) * (tiny - 1)) throw new Error('bad result');
    }
    {
      const size = Math.ceil(n / 8);
      const items = range(n);
      const t0 = performance.now();
      const chunks = await Promise.all(
        range(Math.ceil(n / size)).map((c) => pool.run(items.slice(c * size, (c + 1) * size), { name: 'squareChunk' })),
      );
      const out = (chunks as number[][]).flat();
      emit(impl, 'tiny, default chunksize', n, performance.now() - t0);
      if (out[n - 1] !== (n - 1) * (n - 1)) throw new Error('bad result');
    }
    {
      const t0 = performance.now();
      const r = (await Promise.all(range(tensors).map((i) => pool.run(i, { name: 'freshArray' })))) as Float32Array[];
      emit(impl, '1 MiB tensor results', tensors, performance.now() - t0);
      if (r[tensors - 1]![0] !== tensors - 1) throw new Error('bad result');
    }
  }
  await pool.destroy();
}

if (isMainThread) await main();
