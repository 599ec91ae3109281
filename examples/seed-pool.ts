// The program of the Chinese seed post ("PyTorch 多进程共享内存策略：'file_system' 解释"), in
// TypeScript: set the file_system sharing strategy, then Pool(processes=4).map(worker, data)
// with data = [1, 2, 3, 4], each worker computing on shared data. Here the shared data is a
// matrix made once in shared memory; worker k scales it by k and multiplies it by a vector,
// writing row k of the output, which is shared too: nothing is copied either way.
//
//   node dist/examples/seed-pool.js          (or: npx tsx examples/seed-pool.ts)
//
// One file, as the post has it: the workers import this module for `worker`, and the main
// code below is guarded so that they do not run it (torch: `if __name__ == '__main__'`; here
// `mp.parentProcess() === null`).
import * as mp from 'tensorproc';

const N = 512;

/** The task: data k, with the shared matrix, vector and output. Returns a checksum of its row. */
export function worker(task: { k: number; matrix: mp.Tensor; vector: mp.Tensor; out: mp.Tensor }): { k: number; pid: number; sum: number } {
  const { k, matrix, vector, out } = task;
  const a = matrix.data as Float32Array;
  const x = vector.data as Float32Array;
  const row = out.select(0, k - 1).data as Float32Array;
  let sum = 0;
  for (let r = 0; r < N; r++) {
    let acc = 0;
    for (let c = 0; c < N; c++) acc += a[r * N + c]! * x[c]!;
    row[r] = k * acc;
    sum += row[r]!;
  }
  return { k, pid: process.pid, sum };
}

async function main(json: boolean): Promise<void> {
  // 设置共享内存策略 — set the sharing strategy.
  mp.setSharingStrategy('file_system');

  // The shared data: born in shared memory, so sending it to a worker costs a name.
  const matrix = mp.empty([N, N], { shared: true });
  const vector = mp.empty([N], { shared: true });
  const out = mp.zeros([4, N], { shared: true });
  const a = matrix.data as Float32Array;
  for (let i = 0; i < a.length; i++) a[i] = ((i * 7) % 13) / 13;
  (vector.data as Float32Array).forEach((_, i, v) => (v[i] = 1 / (1 + i)));

  // 创建进程池 — make the pool; 将数据分配给每个进程 — give each process its data.
  await using pool = new mp.Pool({ processes: 4 });
  const data = [1, 2, 3, 4];
  const results = await pool.map<{ k: number; pid: number; sum: number }>(
    { module: import.meta.url, export: 'worker' },
    data.map((k) => ({ k, matrix, vector, out })),
  );

  // The workers wrote `out` in place: check it here against the same computation.
  const mismatches: number[] = [];
  for (const k of data) {
    const expected = worker({ k, matrix, vector, out: mp.zeros([4, N]) }).sum;
    let got = 0;
    for (const v of out.select(0, k - 1).data as Float32Array) got += v;
    if (Math.abs(got - expected) > 1e-3 * Math.abs(expected) || Math.abs(results[k - 1]!.sum - expected) > 1e-3 * Math.abs(expected))
      mismatches.push(k);
  }
  const report = { strategy: mp.getSharingStrategy(), processes: pool.processes, results, mismatches };
  if (json) {
    console.log(JSON.stringify(report));
  } else {
    console.log(`sharing strategy: ${report.strategy}, ${report.processes} processes`);
    for (const r of results) console.log(`  data ${r.k}: worker pid ${r.pid}, row sum ${r.sum.toFixed(3)}`);
    console.log(
      mismatches.length === 0
        ? 'every row written by the workers in shared memory matches'
        : `rows that do not match: ${mismatches.join(', ')}`,
    );
  }
  for (const t of [matrix, vector, out]) t.release();
}

if (mp.parentProcess() === null) await main(process.argv.includes('--json'));
