// W2 (shared/YARDSTICK.md): start N processes that do nothing and wait for all, N = 2 and 4.
// tensorproc's spawn (and its thread children) against a bare child_process.fork of an empty
// module and torch.multiprocessing.spawn (bench/anchors/torch-spawn.py, with the first
// python3 that has torch), side by side in one run, trials interleaved so that machine noise
// hits all alike; then how soon join() reports a failed child.
//
//   node --expose-gc dist/bench/spawn.js        (or `tensorproc bench --only W2`)
// Records as NOTE [Bench records]; TENSORPROC_BENCH_QUICK=1 for fewer trials.
import { fork } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawn, startProcesses } from '../src/index.js';
import { anchorPath, findPythons, runJsonLines } from './lib/programs.js';
import { benchEnv, runWorkload, type Step, type StepRecord } from './lib/workload.js';

const env = benchEnv();
const NS = [2, 4];
const TRIALS = env.smoke ? 1 : env.quick ? 3 : 10;
/**
 * torch's start costs seconds (each child imports torch): fewer trials of it, and --quick
 * times one cold start of 2 only.
 */
const TORCH_TRIALS = env.quick ? 1 : 4;
const TORCH_NS = env.quick ? [2] : NS;

const dir = mkdtempSync(join(tmpdir(), 'tensorproc-bench-spawn-'));
const bareModule = join(dir, 'noop.mjs');
const targetModule = join(dir, 'noop-target.mjs');
writeFileSync(bareModule, '');
writeFileSync(targetModule, 'export default function noop() {}\n');
// For the failure latency: child 0 notes the time and exits 3; child 1 waits to be stopped.
// The time is process.hrtime's, CLOCK_MONOTONIC, which the parent reads too: performance.timeOrigin
// is each process's own sample of the wall clock at its start, and two processes' differed by
// more than the latency (a clean-clone run printed -21.96 ms after the exit).
const failModule = join(dir, 'fail-target.mjs');
writeFileSync(
  failModule,
  `import { writeFileSync } from 'node:fs';
export default function (i, file) {
  if (i === 0) { writeFileSync(file, String(process.hrtime.bigint())); process.exit(3); }
  setInterval(() => {}, 1 << 30);
}
`,
);

type Driver = (n: number) => Promise<void>;
const drivers: Record<string, Driver> = {
  'tensorproc spawn': (n) => spawn({ module: targetModule }, { nprocs: n }),
  'tensorproc thread': (n) => startProcesses({ module: targetModule }, { nprocs: n, startMethod: 'thread' }),
  'child_process.fork': (n) =>
    Promise.all(Array.from({ length: n }, () => new Promise<void>((resolve) => fork(bareModule).once('exit', () => resolve())))).then(
      () => {},
    ),
};

const w2 = (impl: string, n: number, seconds: number): StepRecord => ({
  impl,
  case: `N=${n}`,
  count: n,
  value: +seconds.toFixed(4),
  unit: 's',
  better: 'lower',
});

async function timed(name: string, n: number): Promise<StepRecord> {
  const t0 = performance.now();
  await drivers[name]!(n);
  return w2(name, n, (performance.now() - t0) / 1000);
}

/** From the failing child's last moment to join() seeing its exit, and to join() rejecting. */
async function failureLatency(startMethod: 'spawn' | 'thread', trial: number): Promise<StepRecord[]> {
  const stamp = join(dir, `stamp-${startMethod}-${trial}`);
  const ctx = startProcesses({ module: failModule }, { args: [stamp], nprocs: 2, join: false, startMethod });
  await ctx.started;
  const seen = ctx.processes[0]!.exited.then(() => process.hrtime.bigint());
  const rejected = await ctx.join().then(
    () => null,
    () => process.hrtime.bigint(),
  );
  const exitedAt = BigInt(readFileSync(stamp, 'utf8'));
  const msAfter = (t: bigint | null): number => (t === null ? NaN : +(Number(t - exitedAt) / 1e6).toFixed(2));
  const impl = `tensorproc ${startMethod}`;
  return [
    { impl, case: 'failure seen by join()', value: msAfter(await seen), unit: 'ms after the exit', better: 'lower' },
    { impl, case: 'join() rejected, sibling stopped', value: msAfter(rejected), unit: 'ms after the exit', better: 'lower' },
  ];
}

function steps(): Step[] {
  const { torch } = findPythons();
  const out: Step[] = [];
  // One warm-up each: the first start pays for disk caches and the parent's own imports.
  out.push({
    label: 'warm-up',
    weight: 1,
    run: async () => {
      for (const n of NS) for (const d of Object.values(drivers)) await d(n);
      return [];
    },
  });
  for (let t = 0; t < TRIALS; t++) {
    for (const n of NS)
      for (const name of Object.keys(drivers))
        out.push({ label: `${name} N=${n}`, weight: 0.05 * n, run: async () => [await timed(name, n)] });
  }
  if (torch) {
    out.push({
      label: 'torch spawn',
      weight: (TORCH_TRIALS + (env.quick ? 0 : 1)) * 2 * TORCH_NS.length + 2,
      run: async () => {
        const args = [anchorPath('torch-spawn.py'), String(TORCH_TRIALS), env.quick ? '0' : '1', ...TORCH_NS.map(String)];
        return (await runJsonLines(torch.path, args)).map((r) => w2('torch spawn', Number(r.n), Number(r.seconds)));
      },
    });
  }
  for (let t = 0; t < TRIALS; t++) {
    for (const m of ['spawn', 'thread'] as const) out.push({ label: `failure latency ${m}`, weight: 0.1, run: () => failureLatency(m, t) });
  }
  return out;
}

runWorkload('W2', steps(), env)
  .catch((e: unknown) => {
    console.error(e);
    process.exitCode = 1;
  })
  .finally(() => rmSync(dir, { recursive: true, force: true }));
