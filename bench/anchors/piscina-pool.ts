// W3 anchor (YARDSTICK.md) for what a Node user has without tensorproc: piscina 5, a pool of
// 2 worker threads, warmed with 100 tiny tasks. Then, TRIALS times: 20,000 tiny tasks
// (x -> x * x), one run() each (piscina has no map and no chunksize); 200,000 tiny tasks in
// chunks the size CPython's map would make (ceil(n / (4 x 2))), a run() per chunk mapping it;
// 500 tasks that each return a fresh 1 MiB Float32Array, filled (structured clone, as
// piscina returns values). One JSON line per measurement.
//
//   node piscina-pool.js TRIALS [tiny,default,tensor]
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
  const cases = (process.argv[3] ?? 'tiny,default,tensor').split(',');
  const pool = new Piscina({ filename: fileURLToPath(import.meta.url), minThreads: 2, maxThreads: 2 });
  const range = (n: number): number[] => Array.from({ length: n }, (_, i) => i);
  await Promise.all(range(100).map((i) => pool.run(i, { name: 'square' })));
  for (let t = 0; t < trials; t++) {
    if (cases.includes('tiny')) {
      const t0 = performance.now();
      await Promise.all(range(20_000).map((i) => pool.run(i, { name: 'square' })));
      emit('piscina (threads)', 'tiny, chunksize 1', 20_000, performance.now() - t0);
    }
    if (cases.includes('default')) {
      const n = 200_000;
      const size = Math.ceil(n / 8);
      const items = range(n);
      const t0 = performance.now();
      const chunks = await Promise.all(range(Math.ceil(n / size)).map((c) => pool.run(items.slice(c * size, (c + 1) * size), { name: 'squareChunk' })));
      const out = (chunks as number[][]).flat();
      if (out[n - 1] !== (n - 1) * (n - 1)) throw new Error('bad result');
      emit('piscina (threads)', 'tiny, default chunksize', n, performance.now() - t0);
    }
    if (cases.includes('tensor')) {
      const t0 = performance.now();
      const r = (await Promise.all(range(500).map((i) => pool.run(i, { name: 'freshArray' })))) as Float32Array[];
      const ms = performance.now() - t0;
      if (r[499]![0] !== 499) throw new Error('bad result');
      emit('piscina (threads, structured clone)', '1 MiB tensor results', 500, ms);
    }
  }
  await pool.destroy();
}

if (isMainThread) await main();
