// W3 mixed (shared/YARDSTICK.md, added 2026-12-04): a pool of 2, one worker busy with a long
// task (3 s of CPU, `hold`), then 1,000 tasks of about 1 ms of CPU each (`spin`) through
// `map` at the default chunksize, at chunksize 1, and through `imap`. Each call's time is
// judged against one free worker running all 1,000 (one chunk of them all, measured on the
// same pool just before): at most 1.5x. CPython's Pool (bench/anchors/cpython-pool-mixed.py)
// runs the same in the same run; its workers share one task queue, so the idle one takes
// every short task. The long task is released as soon as the short ones are timed, so that a
// trial costs seconds, not 3 s a case.
//
// Records, per implementation: the free worker's time ('one free worker') and each case's,
// in ms (lower is better), and each case's time as a multiple of the free worker's of the
// same trial (unit 'x one free worker', judged against 1.5: bench/lib/verdicts.ts).
//
//   node --expose-gc dist/bench/pool-mixed.js     (or `tensorproc bench --only W3mixed`; part of a plain `tensorproc bench`)
// TENSORPROC_BENCH_QUICK=1: one trial, 200 tasks, a 1 s hold.
import { Event as MpEvent, Pool, type StartMethod } from '../src/index.js';
import { anchorPath, findPythons, runJsonLines } from './lib/programs.js';
import { benchEnv, runWorkload, type Step, type StepRecord } from './lib/workload.js';

const env = benchEnv();
const TRIALS = env.quick ? 1 : 3;
const COUNT = env.smoke ? 50 : env.quick ? 200 : 1000;
const HOLD_MS = env.quick ? 1000 : 3000;
const TASKS = new URL('./lib/w3-tasks.js', import.meta.url);
const spin = { module: TASKS, export: 'spin' };
const items = Array.from({ length: COUNT }, (_, i) => i);

export const FREE = 'one free worker';
const CASES: [string, (pool: Pool) => Promise<unknown[]>][] = [
  ['map, default chunksize', (pool) => pool.map(spin, items)],
  ['map, chunksize 1', (pool) => pool.map(spin, items, { chunksize: 1 })],
  [
    'imap',
    async (pool) => {
      const out: unknown[] = [];
      for await (const v of pool.imap(spin, items)) out.push(v);
      return out;
    },
  ],
];

function records(impl: string, trial: Map<string, number>): StepRecord[] {
  const free = trial.get(FREE)!;
  const out: StepRecord[] = [];
  for (const [c, ms] of trial) {
    out.push({ impl, case: c, count: COUNT, value: +ms.toFixed(2), unit: 'ms', better: 'lower' });
    if (c !== FREE) out.push({ impl, case: c, count: COUNT, value: +(ms / free).toFixed(3), unit: 'x one free worker', better: 'lower' });
  }
  return out;
}

function ours(startMethod: StartMethod): Step {
  const impl = `tensorproc ${startMethod === 'spawn' ? 'processes' : 'threads'}`;
  return {
    label: impl,
    weight: 4 * (COUNT / 1000) + 1,
    run: async () => {
      const pool = new Pool({ processes: 2, startMethod });
      const started = new MpEvent();
      const release = new MpEvent();
      try {
        await pool.map(spin, items.slice(0, 100)); // warm, as the anchors
        const trial = new Map<string, number>();
        let t0 = performance.now();
        await pool.map(spin, items, { chunksize: COUNT });
        trial.set(FREE, performance.now() - t0);
        for (const [name, run] of CASES) {
          started.clear();
          release.clear();
          const held = pool.apply({ module: TASKS, export: 'hold' }, [started, release, HOLD_MS]);
          await started.wait();
          t0 = performance.now();
          const out = await run(pool);
          trial.set(name, performance.now() - t0);
          if (out.length !== COUNT || out[COUNT - 1] !== COUNT - 1) throw new Error(`W3 mixed: ${name} returned wrong results`);
          release.set();
          await held;
        }
        return records(impl, trial);
      } finally {
        pool.close();
        await pool.join();
        started.close();
        release.close();
      }
    },
  };
}

function cpython(): Step {
  return {
    label: 'CPython Pool',
    weight: 2 + TRIALS * (4 * (COUNT / 1000) + 1),
    run: async () => {
      // CPython's Pool is the anchor: any python3 will do; the torch one is looked up first.
      const { torch, any } = findPythons();
      const py = torch ?? any;
      if (py === null) return [];
      const rows = await runJsonLines(py.path, [anchorPath('cpython-pool-mixed.py'), String(TRIALS), String(COUNT), String(HOLD_MS)]);
      const out: StepRecord[] = [];
      for (let t = 0; t < rows.length; t += 1 + CASES.length) {
        const trial = new Map(rows.slice(t, t + 1 + CASES.length).map((r) => [String(r.case), Number(r.seconds) * 1000]));
        out.push(...records('CPython', trial));
      }
      return out;
    },
  };
}

function steps(): Step[] {
  const out: Step[] = [];
  for (let t = 0; t < TRIALS; t++) for (const m of ['spawn', 'thread'] as StartMethod[]) out.push(ours(m));
  out.push(cpython());
  return out;
}

runWorkload('W3mixed', steps(), env).catch((e: unknown) => {
  console.error(e);
  process.exitCode = 1;
});
