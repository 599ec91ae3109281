// The sync bench (`tensorproc bench --only sync`): what a lock costs, beside CPython's
// multiprocessing locks (which torch.multiprocessing re-exports unchanged), measured by
// bench/anchors/python-lock.py in the same run with the first python3 that runs.
//  - Uncontended, in one process (the best of 9 timed repetitions after a warm-up of as
//    many calls, both sides, as timeit does): acquire+release of a Lock (acquireSync: Python's acquire()
//    is blocking and synchronous too), a `using lock.holdSync()` scope (Python's `with lock:`),
//    an RLock and a Semaphore; and, ours only, `await lock.acquire()` + release(), and the
//    limit: a bare compareExchange + exchange on a shared word, what any such lock must do.
//  - Contended: a counter (a raw Value, read then written) incremented N times by each of 2
//    process children under one Lock, timed from a Barrier that starts them to the later one's
//    end (process.hrtime and Python's monotonic_ns are both CLOCK_MONOTONIC, so the parent and
//    the children's clocks agree). The counter must end exact.
// Issue 13's bar: uncontended acquire+release at least 5x as fast as Python's.
//
//   node dist/bench/sync.js        (or `tensorproc bench --only sync`)
// Records as NOTE [Bench records]; TENSORPROC_BENCH_QUICK=1 for short counts. This file is
// also the children's target module: its main code runs only in the process started alone.
import * as mp from '../src/index.js';
import { anchorPath, findPythons, runJsonLines } from './lib/programs.js';
import { benchEnv, runWorkload, type Step, type StepRecord } from './lib/workload.js';

const IMPL = 'tensorproc';
const ANCHOR = 'python multiprocessing';

/** Child of the contended case: `n` increments under `lock`, its end time in ends[i] (ns). */
export async function count(
  i: number,
  lock: mp.Lock,
  counter: mp.SharedValue,
  start: mp.Barrier,
  ends: mp.SharedArray,
  n: number,
): Promise<void> {
  await start.wait();
  for (let k = 0; k < n; k++) {
    lock.acquireSync();
    counter.value = (counter.value as number) + 1;
    lock.release();
  }
  ends.set(i, process.hrtime.bigint());
}

/** Timed repetitions of each uncontended case: the figure is the best (the anchor does the same). */
const REPS = 9;

/**
 * ns per call of `body(k)`: a warm-up of `n` calls (the optimising compiler is done by then),
 * then the best of REPS timed repetitions of n / REPS calls, as Python's timeit advises: noise
 * (another process's burst on these shared cores) only ever adds time. The runner's --runs
 * gives the median of such figures over runs.
 */
function nsPerOp(body: (k: number) => void, n: number): number {
  body(n);
  const per = Math.ceil(n / REPS);
  const times: number[] = [];
  for (let r = 0; r < REPS; r++) {
    const t0 = process.hrtime.bigint();
    body(per);
    times.push(Number(process.hrtime.bigint() - t0) / per);
  }
  return Math.min(...times);
}

async function nsPerOpAsync(body: (k: number) => Promise<void>, n: number): Promise<number> {
  await body(n);
  const per = Math.ceil(n / REPS);
  const times: number[] = [];
  for (let r = 0; r < REPS; r++) {
    const t0 = process.hrtime.bigint();
    await body(per);
    times.push(Number(process.hrtime.bigint() - t0) / per);
  }
  return Math.min(...times);
}

const ns = (c: string, value: number, count: number): StepRecord => ({
  impl: IMPL,
  case: c,
  value: +value.toFixed(1),
  unit: 'ns',
  better: 'lower',
  count,
});

async function uncontended(n: number): Promise<StepRecord[]> {
  const lock = new mp.Lock();
  const rlock = new mp.RLock();
  const sem = new mp.Semaphore(1);
  const word = new Int32Array(new SharedArrayBuffer(64));
  const out = [
    ns(
      'Lock acquire+release',
      nsPerOp((k) => {
        for (let j = 0; j < k; j++) {
          lock.acquireSync();
          lock.release();
        }
      }, n),
      n,
    ),
    ns(
      'Lock scope (with / using holdSync)',
      nsPerOp((k) => {
        for (let j = 0; j < k; j++) {
          using _held = lock.holdSync();
        }
      }, n),
      n,
    ),
    ns(
      'RLock acquire+release',
      nsPerOp((k) => {
        for (let j = 0; j < k; j++) {
          rlock.acquireSync();
          rlock.release();
        }
      }, n),
      n,
    ),
    ns(
      'Semaphore acquire+release',
      nsPerOp((k) => {
        for (let j = 0; j < k; j++) {
          sem.acquireSync();
          sem.release();
        }
      }, n),
      n,
    ),
    // The limit (ours only): the two atomic read-modify-writes any lock shared across
    // processes needs (take, then free with a check for sleepers), with nothing around them.
    // NOTE [Lock word protocol] does exactly these on the uncontended path.
    ns(
      'limit: compareExchange+exchange on a shared word',
      nsPerOp((k) => {
        for (let j = 0; j < k; j++) {
          if (Atomics.compareExchange(word, 0, 0, 1) !== 0) throw new Error('the bare word was taken');
          if (Atomics.exchange(word, 0, 0) < 0) throw new Error('the bare word had sleepers');
        }
      }, n),
      n,
    ),
    ns(
      'Lock await acquire()+release',
      await nsPerOpAsync(async (k) => {
        for (let j = 0; j < k; j++) {
          await lock.acquire();
          lock.release();
        }
      }, n),
      n,
    ),
  ];
  return out;
}

async function contended(n: number): Promise<StepRecord> {
  const lock = new mp.Lock();
  const counter = mp.Value('i', 0, { lock: false });
  const ends = mp.Array('q', 2, { lock: false });
  const start = new mp.Barrier(3);
  const ctx = mp.startProcesses(
    { module: import.meta.url, export: 'count' },
    { args: [lock, counter, start, ends, n], nprocs: 2, join: false },
  );
  await start.wait();
  const t0 = process.hrtime.bigint();
  await ctx.join();
  if (counter.value !== 2 * n) throw new Error(`the counter ended at ${String(counter.value)}, not ${2 * n}`);
  const end = [ends.get(0), ends.get(1)].reduce((a, b) => ((b as bigint) > (a as bigint) ? b : a)) as bigint;
  const seconds = Number(end - t0) / 1e9;
  return {
    impl: IMPL,
    case: 'contended counter, 2 processes',
    value: Math.round((2 * n) / seconds),
    unit: 'ops/s',
    better: 'higher',
    count: 2 * n,
  };
}

function steps(quick: boolean): Step[] {
  const UNCONTENDED = quick ? 200_000 : 2_000_000;
  const CONTENDED = quick ? 20_000 : 200_000;
  const python = findPythons().any;
  const anchor = (mode: string, n: number) => async (): Promise<StepRecord[]> => {
    if (python === null) return [];
    const rows = await runJsonLines(python.path, [anchorPath('python-lock.py'), mode, String(n)]);
    return rows.map((r) => ({
      impl: ANCHOR,
      case: String(r.case),
      value: +Number(r.value).toFixed(1),
      unit: String(r.unit),
      better: r.better === 'higher' ? 'higher' : 'lower',
      count: Number(r.count),
    }));
  };
  return [
    { label: 'tensorproc uncontended', weight: quick ? 0.3 : 2, run: () => uncontended(UNCONTENDED) },
    { label: 'python uncontended', weight: quick ? 0.5 : 2, run: anchor('uncontended', UNCONTENDED) },
    { label: 'tensorproc contended', weight: quick ? 0.5 : 2, run: async () => [await contended(CONTENDED)] },
    { label: 'python contended', weight: quick ? 0.5 : 2, run: anchor('contended', CONTENDED) },
  ];
}

if (mp.parentProcess() === null) {
  const env = benchEnv();
  await runWorkload('sync', steps(env.quick), env).catch((e: unknown) => {
    console.error(e);
    process.exitCode = 1;
  });
}
