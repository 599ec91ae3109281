// One W3 tiny-task figure as a user's program sees it (YARDSTICK.md, "How a call is timed"):
// in a fresh process, a pool of 2 warmed with 100 tasks, then the first big map, timed. The
// parent's code for that map has not been compiled by V8 yet, as in a user's single call;
// a pool kept across trials in one process would time the later, compiled rounds instead.
//
//   node dist/bench/lib/w3-first-call.js spawn|thread COUNT [CHUNKSIZE]   → {"seconds": s}
import { Pool, type StartMethod } from '../../src/index.js';

const [startMethod, count, chunksize] = process.argv.slice(2);
const square = { module: new URL('./w3-tasks.js', import.meta.url), export: 'square' };
const pool = new Pool({ processes: 2, startMethod: startMethod as StartMethod });
try {
  await pool.map(
    square,
    Array.from({ length: 100 }, (_, i) => i),
  );
  const items = Array.from({ length: Number(count) }, (_, i) => i);
  const t0 = performance.now();
  const out = await pool.map<number>(square, items, chunksize === undefined ? {} : { chunksize: Number(chunksize) });
  const seconds = (performance.now() - t0) / 1000;
  const n = items.length - 1;
  if (out.length !== items.length || out[n] !== n * n) throw new Error('W3: a result is wrong');
  console.log(JSON.stringify({ seconds }));
} finally {
  pool.close();
  await pool.join();
}
