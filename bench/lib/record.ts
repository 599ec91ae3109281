// NOTE [Bench records]: what every workload program prints and the runner reads.
//
// A workload is a program (bench/queue.ts is W1, bench/spawn.ts W2, ...) that the runner
// (bench/run.ts) starts in a process of its own, so that one workload's heap, caches and
// children do not colour the next, and so that whatever a library prints on stderr stays
// out of the report (the runner shows a failed workload's stderr, nothing else). The program
// prints one JSON object per line on stdout:
//   - a measurement, a BenchRecord below;
//   - progress, `{"progress": {"done": 3, "total": 12, "label": "torch file_system 1 KiB"}}`,
//     done and total in any unit the program likes (expected seconds, steps);
//   - what it could not measure, and why, `{"workload": "W1", "impl": "message limit",
//     "not_measured": "no python3 on PATH"}` (a NotMeasured below): an anchor whose
//     interpreter this machine lacks; the runner adds its own for a workload whose program is
//     not in the build (no impl then) and for torch when no python3 imports it;
// and anything else it likes (its own markdown table when run alone), which the runner
// ignores. Under --json the runner prints the measurements and the NotMeasured lines, and
// nothing else, so that a script sees what is missing instead of a silent gap. The runner tells it how to run through the environment (BenchEnv, workload.ts).
// A program in the style of the first benches, whose lines carry their figure under a name
// of their own (`seconds`, `tasks_per_s`, ...), is read through toRecord() below, so that a
// workload written before this runner needs no change to be folded in.
import { fmtBytes } from './stats.js';

export type Better = 'higher' | 'lower';

export interface BenchRecord {
  /** 'W1'..'W4' (YARDSTICK.md), or the name of another bench ('alloc', 'messages'). */
  workload: string;
  /** Who was measured: 'tensorproc file_descriptor', 'torch file_system', 'fill limit'. */
  impl: string;
  /** What was measured, the row of its table: '1 KiB', 'N=2', 'tiny, chunksize 1'. */
  case: string;
  /** The figure, in `unit`. */
  value: number;
  unit: string;
  better: Better;
  /** Which repetition of the workload (0, 1, ...): the tables show medians over runs. */
  run: number;
  /** Messages, tasks, batches or processes behind the figure. */
  count?: number;
  /** W1: the tensor's size in bytes (the plot's x axis). */
  bytes?: number;
  GB_per_s?: number;
}

/** The fields every record has, as the tests and scripts may rely on them. */
export const RECORD_FIELDS = ['workload', 'impl', 'case', 'value', 'unit', 'better', 'run'] as const;

/** What a run could not measure, and why (NOTE [Bench records]). */
export interface NotMeasured {
  workload: string;
  /** The implementation left out ('torch', 'message limit'); absent: the whole workload. */
  impl?: string;
  not_measured: string;
}

export interface Progress {
  done: number;
  total: number;
  label: string;
}

/** Figures under their own names in the older line style, and what they mean. */
const FIGURES: Record<string, { unit: string; better: Better }> = {
  msgs_per_s: { unit: 'msgs/s', better: 'higher' },
  tasks_per_s: { unit: 'tasks/s', better: 'higher' },
  batches_per_s: { unit: 'batches/s', better: 'higher' },
  samples_per_s: { unit: 'samples/s', better: 'higher' },
  ops_per_s: { unit: 'ops/s', better: 'higher' },
  seconds: { unit: 's', better: 'lower' },
  s: { unit: 's', better: 'lower' },
  ms: { unit: 'ms', better: 'lower' },
  us_per_tensor: { unit: 'µs', better: 'lower' },
  us_per_message: { unit: 'µs', better: 'lower' },
  us_per_op: { unit: 'µs', better: 'lower' },
};
/** Fields of an older line that describe the run, not the case. */
const NOT_CASE = new Set([
  'workload',
  'bench',
  'w',
  'impl',
  'run',
  'trial',
  'node',
  'torch',
  'count',
  'tasks',
  'batches',
  'messages',
  'GB_per_s',
  'us_per_msg',
  'python',
]);
/** An implementation named with its version ('torch 1.13.1'): the name is the implementation. */
const VERSIONED = /^(torch|piscina|node) v?\d+(\.[\w-]+)+$/;

/** What one stdout line of a workload program says, if anything. */
export function parseLine(line: string, workload: string): { record?: BenchRecord; progress?: Progress; absent?: NotMeasured } {
  if (!line.startsWith('{')) return {};
  let o: Record<string, unknown>;
  try {
    o = JSON.parse(line) as Record<string, unknown>;
  } catch {
    return {};
  }
  if (o.progress !== null && typeof o.progress === 'object') {
    const p = o.progress as Partial<Progress>;
    if (typeof p.done === 'number' && typeof p.total === 'number')
      return { progress: { done: p.done, total: p.total, label: String(p.label ?? '') } };
    return {};
  }
  if (typeof o.not_measured === 'string') {
    const absent: NotMeasured = { workload: String(o.workload ?? workload), not_measured: o.not_measured };
    if (typeof o.impl === 'string') absent.impl = o.impl;
    return { absent };
  }
  const record = toRecord(o, workload);
  return record === null ? {} : { record };
}

/**
 * A record from one JSON object: a BenchRecord as it is, or an older line (`{workload:'W2',
 * impl, n: 2, run: 0, seconds: 0.1}`) whose figure is the first field named in FIGURES and
 * whose case is made of its other fields (`n=2`). Null for a line that holds no figure.
 */
export function toRecord(o: Record<string, unknown>, workload: string): BenchRecord | null {
  if (typeof o.value === 'number' && typeof o.unit === 'string' && typeof o.impl === 'string' && typeof o.case === 'string') {
    return {
      ...(o as unknown as BenchRecord),
      workload: String(o.workload ?? workload),
      run: Number(o.run ?? 0),
      better: o.better === 'lower' ? 'lower' : 'higher',
    };
  }
  const figure = Object.keys(FIGURES).find((k) => typeof o[k] === 'number');
  if (figure === undefined || typeof o.impl !== 'string') return null;
  const caseParts = Object.entries(o)
    .filter(([k, v]) => !NOT_CASE.has(k) && !(k in FIGURES) && v !== null && typeof v !== 'object')
    .map(([k, v], _, all) => (k === 'bytes' ? fmtBytes(Number(v)) : all.length === 1 && typeof v === 'string' ? v : `${k}=${String(v)}`));
  const record: BenchRecord = {
    workload,
    impl: VERSIONED.test(o.impl) ? o.impl.split(' ')[0]! : o.impl,
    case: caseParts.join(', ') || '–',
    value: o[figure] as number,
    ...FIGURES[figure]!,
    run: Number(o.run ?? o.trial ?? 0),
  };
  const count = o.count ?? o.tasks ?? o.batches ?? o.messages;
  if (typeof count === 'number') record.count = count;
  if (typeof o.bytes === 'number') record.bytes = o.bytes;
  if (typeof o.GB_per_s === 'number') record.GB_per_s = o.GB_per_s;
  return record;
}
