// `tensorproc bench` (and `npm run bench`): the yardstick's workloads, each a program of
// bench/ run in a process of its own, read through NOTE [Bench records]: a progress bar on
// a terminal while they run, then the tables (bench/lib/report.ts); with `json`, only the
// records, one JSON object a line. What cannot be measured (a workload whose program is not
// in this build, an anchor whose interpreter this machine lacks) is said, in the tables and
// under --json as a NotMeasured line, and the rest runs.
import { accessSync, constants, existsSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import cliProgress from 'cli-progress';
import { PlotNeedsW1Error, PlotUnavailableError, UnknownWorkloadError } from './lib/errors.js';
import { chartingLibraries, writePlot } from './lib/plot.js';
import { piscinaEnv, pythonEnv, runLines } from './lib/programs.js';
import { parseLine, type BenchRecord, type NotMeasured, type Progress } from './lib/record.js';
import { report } from './lib/report.js';

/**
 * Printed under the tables of a --quick run: its counts are a small part of the yardstick's, so
 * the processes' start and the JIT's warm-up weigh on its verdicts more than on the judged run.
 */
const QUICK_VERDICTS =
  "These are --quick counts (W1: a 32nd of the yardstick's bytes; W3: a tenth of its tasks; fewer trials): a smoke run, where the processes' start and the JIT's warm-up weigh more than in the runs the bars are set for. For verdicts, run `tensorproc bench` (add `--only W1` for one workload).";

export interface Workload {
  id: string;
  /** Its program, compiled, beside this file. */
  program: string;
  title: string;
  /** About how long it takes, seconds, for the progress bar: [quick, full]. */
  seconds: [number, number];
  /** Part of a plain `tensorproc bench` (the yardstick), or only when named in --only. */
  yardstick: boolean;
  /** It has torch anchors (YARDSTICK.md: W1-W4), left out where no python3 imports torch. */
  torch?: boolean;
  /** It has a piscina anchor, left out where piscina is not installed. */
  piscina?: boolean;
}

export const WORKLOADS: Workload[] = [
  { id: 'W1', program: 'queue.js', title: 'producer → consumer process through a queue', seconds: [40, 170], yardstick: true, torch: true },
  { id: 'W2', program: 'spawn.js', title: 'start and join N processes', seconds: [8, 40], yardstick: true, torch: true },
  { id: 'W3', program: 'pool.js', title: 'a pool of 2 processes', seconds: [20, 90], yardstick: true, torch: true, piscina: true },
  {
    id: 'W3mixed',
    program: 'pool-mixed.js',
    title: 'a pool of 2, one worker busy, 1,000 short tasks',
    seconds: [12, 40],
    yardstick: true,
    torch: false,
  },
  { id: 'W4', program: 'data.js', title: 'a data loader with 2 workers', seconds: [20, 60], yardstick: true, torch: true },
  { id: 'W5', program: 'cluster.js', title: 'a Pool on a NATS cluster (needs nats-server)', seconds: [25, 60], yardstick: false },
  { id: 'W6', program: 'python.js', title: 'Node producer → Python consumer (needs python3-numpy)', seconds: [30, 150], yardstick: false },
  { id: 'alloc', program: 'alloc.js', title: 'shared allocation', seconds: [15, 30], yardstick: false },
  { id: 'messages', program: 'messages.js', title: 'message encoding', seconds: [10, 20], yardstick: false },
  { id: 'sync', program: 'sync.js', title: 'sync primitives', seconds: [10, 30], yardstick: false },
];

export interface BenchOptions {
  quick: boolean;
  json: boolean;
  /** Workload ids (any case); default: the yardstick's W1-W4. */
  only: string[] | null;
  plot: string | null;
  runs: number;
}

/** The workloads `only` names, in the registry's order; throws naming any it does not know. */
export function chooseWorkloads(only: string[] | null, workloads: Workload[] = WORKLOADS): Workload[] {
  if (only === null) return workloads.filter((w) => w.yardstick);
  const wanted = only.map((s) => s.trim()).filter(Boolean);
  const known = (id: string): boolean => workloads.some((w) => w.id.toLowerCase() === id.toLowerCase());
  const unknown = wanted.filter((id) => !known(id));
  if (unknown.length)
    throw new UnknownWorkloadError(
      unknown,
      workloads.map((w) => w.id),
    );
  return workloads.filter((w) => wanted.some((id) => id.toLowerCase() === w.id.toLowerCase()));
}

const absentLine = (a: NotMeasured): string => `${a.workload}${a.impl ? ` ${a.impl}` : ''}: not measured, ${a.not_measured}`;

interface Outcome {
  records: BenchRecord[];
  error: string | null;
}

/** Runs one workload's program, handing each line it prints to `onRecord` / `onAbsent` / `onProgress`. */
async function runProgram(
  w: Workload,
  file: string,
  options: BenchOptions,
  env: Record<string, string>,
  onRecord: (r: BenchRecord) => void,
  onAbsent: (a: NotMeasured) => void,
  onProgress: (p: Progress) => void,
): Promise<Outcome> {
  const records: BenchRecord[] = [];
  const childEnv = {
    ...process.env,
    ...env,
    TENSORPROC_BENCH: 'records',
    TENSORPROC_BENCH_QUICK: options.quick ? '1' : '0',
    TENSORPROC_BENCH_RUNS: String(options.runs),
  };
  try {
    await runLines(process.execPath, ['--expose-gc', file], childEnv, (line) => {
      const { record, progress, absent } = parseLine(line, w.id);
      if (record) {
        records.push(record);
        onRecord(record);
      }
      if (absent) onAbsent(absent);
      if (progress) onProgress(progress);
    });
    return { records, error: null };
  } catch (e) {
    return { records, error: (e as Error).message };
  }
}

/** Runs the chosen workloads (of `workloads`); resolves to the exit status (1 if one failed). */
export async function runBench(options: BenchOptions, workloads: Workload[] = WORKLOADS): Promise<number> {
  const chosen = chooseWorkloads(options.only, workloads);
  const here = (name: string): string => fileURLToPath(new URL(`./${name}`, import.meta.url));
  const missing = chosen.filter((w) => !existsSync(here(w.program)));
  const runnable = chosen.filter((w) => !missing.includes(w));
  if (options.plot !== null) {
    // Before minutes of measuring, not after them.
    if (!runnable.some((w) => w.id === 'W1')) throw new PlotNeedsW1Error();
    await chartingLibraries();
    try {
      accessSync(dirname(resolve(options.plot)), constants.W_OK);
    } catch (e) {
      throw new PlotUnavailableError(`--plot cannot write ${options.plot}: ${(e as Error).message}`, { cause: e });
    }
  }
  const env = { ...pythonEnv(), ...piscinaEnv() };
  const secondsOf = (w: Workload): number => w.seconds[options.quick ? 0 : 1] * options.runs;
  const total = runnable.reduce((s, w) => s + secondsOf(w), 0);
  const say = (line: string): void => {
    if (!options.json) process.stderr.write(`${line}\n`);
  };
  const absent: NotMeasured[] = [];
  const notMeasured = (a: NotMeasured): void => {
    absent.push(a);
    if (options.json) process.stdout.write(`${JSON.stringify(a)}\n`);
  };
  for (const w of missing) notMeasured({ workload: w.id, not_measured: `bench/${w.program.replace(/\.js$/, '.ts')} is not in this build` });
  if (!env.TENSORPROC_BENCH_TORCH) {
    for (const w of runnable.filter((x) => x.torch))
      notMeasured({
        workload: w.id,
        impl: 'torch',
        not_measured: 'no python3 on PATH (nor /usr/bin/python3) imports torch (Debian: apt-get install python3-torch)',
      });
  }
  if (!env.TENSORPROC_BENCH_PISCINA) {
    for (const w of runnable.filter((x) => x.piscina))
      notMeasured({ workload: w.id, impl: 'piscina', not_measured: 'piscina is not installed (npm install piscina@5 beside tensorproc)' });
  }
  for (const a of absent) say(absentLine(a));
  const bar =
    !options.json && process.stderr.isTTY
      ? new cliProgress.SingleBar(
          {
            format: ' {bar} {percentage}% | about {eta_formatted} left | {step}',
            stream: process.stderr,
            hideCursor: true,
            clearOnComplete: true,
            etaBuffer: 40,
            fps: 4,
          },
          cliProgress.Presets.shades_classic,
        )
      : null;
  bar?.start(total, 0, { step: 'starting' });
  const all: BenchRecord[] = [];
  const failures: string[] = [];
  let base = 0;
  for (const w of runnable) {
    const share = secondsOf(w);
    const t0 = performance.now();
    const out = await runProgram(
      w,
      here(w.program),
      options,
      env,
      (r) => {
        if (options.json) process.stdout.write(`${JSON.stringify(r)}\n`);
      },
      (a) => {
        notMeasured(a);
        if (!bar) say(absentLine(a));
      },
      (p) => bar?.update(base + (p.total > 0 ? (share * Math.min(p.done, p.total)) / p.total : 0), { step: `${w.id} ${p.label}` }),
    );
    base += share;
    bar?.update(base, { step: `${w.id} done` });
    all.push(...out.records);
    if (out.error !== null) failures.push(`${w.id} (bench/${w.program}) failed: ${out.error}`);
    else if (!bar) say(`${w.id}: ${out.records.length} measurements in ${((performance.now() - t0) / 1000).toFixed(0)} s`);
  }
  bar?.stop();
  if (!options.json) {
    const lines = [report(all)];
    if (options.quick) lines.push(QUICK_VERDICTS);
    if (absent.length)
      lines.push(
        [
          'Not measured in this run:',
          ...absent.map(
            (a) =>
              `- ${a.workload}${a.impl ? ` ${a.impl}` : ` (${workloads.find((w) => w.id === a.workload)?.title ?? 'the whole workload'})`}: ${a.not_measured}`,
          ),
        ].join('\n'),
      );
    console.log(`\n${lines.join('\n\n')}\n`);
  }
  if (options.plot !== null) {
    const series = await writePlot(
      all,
      options.plot,
      `W1 on ${process.platform}-${process.arch}, Node ${process.version}${env.TENSORPROC_BENCH_TORCH ? `, torch ${env.TENSORPROC_BENCH_TORCH}` : ''}${options.quick ? ' (--quick)' : ''}`,
    );
    say(`plot: ${options.plot} (${series} implementations)`);
  }
  for (const f of failures) process.stderr.write(`${f}\n`);
  return failures.length ? 1 : 0;
}
