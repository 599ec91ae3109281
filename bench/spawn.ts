// W2 (shared/YARDSTICK.md): start N processes that do nothing and wait for all, N = 2 and 4.
// tensorproc's spawn against a bare child_process.fork of an empty module, side by side in
// one run, trials interleaved so that machine noise hits both alike. Prints one JSON line per
// trial and a markdown table of medians and ratios; then how soon join() reports a failure.
//
//   node dist/bench/spawn.js [runs=15]
import { fork } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawn, startProcesses } from '../src/index.js';
import { markdownTable, median } from './lib/stats.js';

const runs = Number(process.argv[2] ?? 15);
const dir = mkdtempSync(join(tmpdir(), 'tensorproc-bench-spawn-'));
const bareModule = join(dir, 'noop.mjs');
const targetModule = join(dir, 'noop-target.mjs');
writeFileSync(bareModule, '');
writeFileSync(targetModule, 'export default function noop() {}\n');
// For the failure latency: child 0 notes the time and exits 3; child 1 waits to be stopped.
const failModule = join(dir, 'fail-target.mjs');
writeFileSync(
  failModule,
  `import { writeFileSync } from 'node:fs';
export default function (i, file) {
  if (i === 0) { writeFileSync(file, String(performance.timeOrigin + performance.now())); process.exit(3); }
  setInterval(() => {}, 1 << 30);
}
`,
);

type Driver = (n: number) => Promise<void>;
const drivers: Record<string, Driver> = {
  'child_process.fork': (n) =>
    Promise.all(
      Array.from({ length: n }, () => new Promise<void>((resolve) => fork(bareModule).once('exit', () => resolve()))),
    ).then(() => {}),
  'tensorproc spawn': (n) => spawn({ module: targetModule }, { nprocs: n }),
  'tensorproc thread': (n) => startProcesses({ module: targetModule }, { nprocs: n, startMethod: 'thread' }),
};

try {
  const results: Record<string, Record<number, number[]>> = {};
  for (const n of [2, 4]) {
    // One warm-up each: the first start pays for disk caches and the parent's own imports.
    for (const d of Object.values(drivers)) await d(n);
    for (let r = 0; r < runs; r++) {
      for (const [name, d] of Object.entries(drivers)) {
        const t0 = performance.now();
        await d(n);
        const seconds = (performance.now() - t0) / 1000;
        ((results[name] ??= {})[n] ??= []).push(seconds);
        console.log(JSON.stringify({ workload: 'W2', impl: name, n, run: r, seconds: +seconds.toFixed(4) }));
      }
    }
  }
  console.log(`\nW2, seconds to start and join N no-op children (median of ${runs}; ratio to child_process.fork)\n`);
  const base = results['child_process.fork']!;
  console.log(markdownTable(
    ['implementation', 'N=2', 'ratio', 'N=4', 'ratio'],
    Object.entries(results).map(([name, byN]) => [name, ...[2, 4].flatMap((n) => {
      const m = median(byN[n]!);
      return [m.toFixed(3), (m / median(base[n]!)).toFixed(2) + 'x'];
    })]),
  ));
  // Failure latency: from the failing child's last moment to join() seeing the failure (its
  // exit resolved) and to join() rejecting (after stopping the sibling with SIGTERM).
  const seen: number[] = [];
  const rejected: number[] = [];
  for (let r = 0; r < runs; r++) {
    for (const startMethod of ['spawn', 'thread'] as const) {
      const stamp = join(dir, `stamp-${startMethod}-${r}`);
      const ctx = startProcesses({ module: failModule }, { args: [stamp], nprocs: 2, join: false, startMethod });
      await ctx.started;
      const failed = ctx.processes[0]!.exited.then(() => performance.timeOrigin + performance.now());
      const done = await ctx.join().then(
        () => NaN,
        () => performance.timeOrigin + performance.now(),
      );
      const exitedAt = Number(readFileSync(stamp, 'utf8'));
      if (startMethod === 'spawn') {
        seen.push((await failed) - exitedAt);
        rejected.push(done - exitedAt);
      }
      console.log(JSON.stringify({ workload: 'failure-latency', startMethod, run: r, seenMs: +((await failed) - exitedAt).toFixed(2), rejectedMs: +(done - exitedAt).toFixed(2) }));
    }
  }
  console.log(`\nFailure latency, process children (median of ${runs}): seen ${median(seen).toFixed(1)} ms, join() rejected ${median(rejected).toFixed(1)} ms after the child's exit (target: within 100 ms).`);
  console.log('\nTarget (issue 3): tensorproc spawn at most 1.3x child_process.fork. torch spawn: 0.95 s (N=2), 2.00 s (N=4).');
} finally {
  rmSync(dir, { recursive: true, force: true });
}
