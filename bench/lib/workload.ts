// The workload side of NOTE [Bench records]: a workload program declares its steps, and
// runWorkload() runs them, prints each record and its progress as JSON lines, and, when the
// program was started on its own rather than by the runner, its tables at the end.
import { printReport } from './report.js';
import type { BenchRecord, NotMeasured } from './record.js';

/** How the runner asks a workload program to run (environment variables, read once). */
export interface BenchEnv {
  /** TENSORPROC_BENCH_QUICK=1: the short counts (`tensorproc bench --quick`). */
  quick: boolean;
  /**
   * TENSORPROC_BENCH_SMOKE=1 (implies quick): the least counts that still run every step, for
   * the tests of the bench's plumbing (test/cli/bench*.test.ts); its figures mean nothing.
   */
  smoke: boolean;
  /** TENSORPROC_BENCH_RUNS: repetitions of every step, interleaved (default 1). */
  runs: number;
  /** TENSORPROC_BENCH=records: started by the runner, which prints the tables itself. */
  underRunner: boolean;
}

export function benchEnv(): BenchEnv {
  const runs = Number(process.env.TENSORPROC_BENCH_RUNS ?? 1);
  const smoke = process.env.TENSORPROC_BENCH_SMOKE === '1';
  return {
    quick: smoke || process.env.TENSORPROC_BENCH_QUICK === '1',
    smoke,
    runs: Number.isInteger(runs) && runs > 0 ? runs : 1,
    underRunner: process.env.TENSORPROC_BENCH === 'records',
  };
}

/** A record as a step returns it: the workload and the run are filled in by runWorkload(). */
export type StepRecord = Omit<BenchRecord, 'workload' | 'run'>;

export interface Step {
  /** Shown beside the progress bar: 'torch file_system 1 KiB'. */
  label: string;
  /** About how many seconds the step takes, so that the bar moves with time, not steps. */
  weight: number;
  run(): Promise<StepRecord[]> | StepRecord[];
}

/**
 * Runs `steps` `env.runs` times (run 0 of every step, then run 1, ...: noise that lasts a
 * while hits every implementation alike), printing each record as a JSON line.
 */
export async function runWorkload(workload: string, steps: Step[], env: BenchEnv = benchEnv()): Promise<BenchRecord[]> {
  const total = steps.reduce((s, x) => s + x.weight, 0) * env.runs;
  const all: BenchRecord[] = [];
  let done = 0;
  for (let run = 0; run < env.runs; run++) {
    for (const step of steps) {
      console.log(JSON.stringify({ progress: { done, total, label: step.label } }));
      for (const r of await step.run()) {
        const record: BenchRecord = { workload, ...r, run };
        all.push(record);
        console.log(JSON.stringify(record));
      }
      done += step.weight;
    }
  }
  console.log(JSON.stringify({ progress: { done: total, total, label: 'done' } }));
  if (!env.underRunner) printReport(all);
  return all;
}

/** Says that `impl` is left out of this run, and why (NOTE [Bench records]): a line for the runner. */
export function printNotMeasured(workload: string, impl: string, reason: string): void {
  const line: NotMeasured = { workload, impl, not_measured: reason };
  console.log(JSON.stringify(line));
}

/** Consumer-side figures of a stream of `count` messages of `bytes`, timed from the 2nd. */
export function streamRecord(impl: string, bytes: number, count: number, seconds: number, caseName: string): StepRecord {
  const msgs = (count - 1) / seconds;
  return {
    impl,
    case: caseName,
    bytes,
    count,
    value: +msgs.toFixed(1),
    unit: 'msgs/s',
    better: 'higher',
    GB_per_s: +((msgs * bytes) / 1e9).toFixed(3),
  };
}
