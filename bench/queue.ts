// W1 (shared/YARDSTICK.md): one producer process, one consumer process, a queue between them.
// Per message the producer makes a fresh float32 tensor of SIZE bytes in shared memory, fills
// it and puts it; the consumer gets it, reads its first and last element and drops it
// (release(), JS's `del`). Consumer-side messages/s from the 2nd message, for both sharing
// strategies, side by side in one run (size by size, every implementation in turn, so that
// noise hits all alike) with the anchors of bench/anchors/: torch.multiprocessing
// (torch-queue.py, with the first python3 that has torch), Node's child_process and
// worker_threads (node-ipc.ts); and the two limits: "fill limit", the producer's work alone
// (fillLimit()), and "message limit", a bare socketpair between two processes moving
// datagrams the size of tensorproc's frame for one tensor (message-limit.py), at the sizes
// where the fill costs less than a message.
//
//   node --expose-gc dist/bench/queue.js        (or `tensorproc bench --only W1`)
// Records as NOTE [Bench records]; TENSORPROC_BENCH_QUICK=1 for the short counts.
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
// The package, as a user imports it (the bundle: NOTE [The package bundle]), here and in the
// children, which load only lib/w1-role.ts and the package (not this module, whose imports
// include the library's own modules: a child holding both copies grew its old generation into
// its first full collection inside the 16 MiB run). frameOf() alone reads the frame of the
// library's own modules, whose tensors it makes with them.
import * as mp from 'tensorproc';
import * as lib from '../src/index.js';
import { encodeMessage } from '../src/transport/index.js';
import { fmtBytes } from './lib/stats.js';
import { anchorPath, findPythons, runJsonLines } from './lib/programs.js';
import { benchEnv, printNotMeasured, runWorkload, streamRecord, type Step, type StepRecord } from './lib/workload.js';

export const SIZES = [1 << 10, 64 << 10, 1 << 20, 16 << 20, 64 << 20];
const clamp = (x: number, lo: number, hi: number): number => Math.max(lo, Math.min(hi, Math.floor(x)));
/** TENSORPROC_BENCH_SMOKE (workload.ts): a tenth of --quick's counts, for the bench's own tests. */
const SMOKE = process.env.TENSORPROC_BENCH_SMOKE === '1';
/** YARDSTICK.md's count, the same for every implementation; --quick: 1/32 of its bytes. */
export const countFor = (size: number, quick: boolean): number =>
  !quick ? clamp(2 ** 30 / size, 40, 50_000) : SMOKE ? clamp(2 ** 22 / size, 5, 200) : clamp(2 ** 25 / size, 10, 2000);
/** As torch-queue.py: a bounded queue, so a fast producer waits instead of running ahead. */
const MAXSIZE = 64;
/** The limit a bare message sets matters where the fill is cheaper than a message. */
const MESSAGE_LIMIT_MAX = 64 << 10;
const STRATEGIES = ['file_descriptor', 'file_system'] as const;

async function runTensorproc(strategy: mp.SharingStrategy, size: number, count: number): Promise<StepRecord> {
  mp.setSharingStrategy(strategy); // as torch-queue.py does, before starting the children
  const q = new mp.Queue<mp.Tensor>({ maxsize: MAXSIZE });
  const out = new mp.Queue<{ dt: number }>();
  try {
    const ctx = await mp.spawn(
      { module: new URL('./lib/w1-role.js', import.meta.url), export: 'role' },
      { args: [q, out, size, count, strategy], nprocs: 2, join: false },
    );
    // A child that fails ends the wait with its error instead of leaving it hanging.
    const failed = (async () => {
      while (!(await ctx.join()));
      return null;
    })();
    const first = await Promise.race([out.get(), failed]);
    if (first === null) throw new Error('the W1 children exited without a result');
    await failed;
    return streamRecord(`tensorproc ${strategy}`, size, count, first.dt, fmtBytes(size));
  } finally {
    q.close();
    out.close();
  }
}

/**
 * The producer's side alone, in this process, with no queue: a fresh shared tensor per
 * message, filled, released, as role() (lib/w1-role.ts) makes them. What a message costs at least once the
 * code is warm (YARDSTICK.md: "the physical limit ... is the bandwidth of writing the tensor
 * once"); W1 can reach it only by overlapping everything else with the fill. Measured under
 * file_descriptor only: the strategy changes how a segment is named, not the memory that is
 * written, so it is the limit of both.
 */
function fillLimit(size: number, count: number): StepRecord {
  const n = size / 4;
  mp.setSharingStrategy('file_descriptor');
  const once = (k: number): void => {
    const t = mp.empty([n], { shared: true });
    t.fill(k);
    t.release();
  };
  for (let k = 0; k < count; k++) once(k); // warm: compiled, segment recycled
  const t0 = performance.now();
  for (let k = 1; k < count; k++) once(k);
  return streamRecord('fill limit', size, count, (performance.now() - t0) / 1000, fmtBytes(size));
}

/** From this size W1 is judged against the fill limit, and the uncached fill limit is shown beside it. */
const FILL_JUDGED_MIN = 16 << 20;

/** The last-level cache's bytes (sysfs), or a generous guess where it is not readable. */
function lastLevelCacheBytes(): number {
  for (const index of [3, 2]) {
    try {
      const text = readFileSync(`/sys/devices/system/cpu/cpu0/cache/index${index}/size`, 'utf8').trim();
      const m = /^(\d+)([KMG]?)$/.exec(text);
      if (m) return Number(m[1]) * ({ '': 1, K: 1024, M: 2 ** 20, G: 2 ** 30 } as Record<string, number>)[m[2]!]!;
    } catch {
      // No such cache level here: try the next.
    }
  }
  return 128 * 2 ** 20;
}

/**
 * NOTE [Two fill limits]
 * fillLimit() refills one segment back to back, which only a loop doing nothing else between
 * fills can: where the tensor fits in the last-level cache and fill() uses ordinary stores,
 * its lines stay there, and a producer that hands each tensor over (a put, a wait) finds them
 * gone. Measured on a VM with a 105 MiB L3 before fill() streamed 16 MiB (NOTE [Streaming
 * fill]): back to back 0.95 ms a 16 MiB fill, after a pause of 100 µs 1.1-2 ms, from memory 2
 * ms, so the limit was one no pipeline reaches. The uncached limit writes the same tensors in
 * rotation over twice the cache, so that each fill goes to memory, as the yardstick's
 * "bandwidth of writing the tensor once" reads. W1 is judged against the first; the second,
 * beside it, shows where the first is a cache's figure. With streaming fills the two agree at
 * 16 MiB (2026-12-03, 4 runs: 1,280-1,382 against 1,264-1,324 fills/s); at 64 MiB the rotation
 * (four segments, 256 MiB of pages) ran below one segment refilled (212-345 against 355-373),
 * so there too the first is the higher bar.
 */
function uncachedFillLimit(size: number, count: number): StepRecord {
  const n = size / 4;
  mp.setSharingStrategy('file_descriptor');
  const ring = Array.from({ length: Math.max(2, Math.ceil((2 * lastLevelCacheBytes()) / size)) }, () => mp.empty([n], { shared: true }));
  try {
    for (const t of ring) t.fill(1); // first touch: the pages exist before the clock starts
    const t0 = performance.now();
    for (let k = 1; k < count; k++) ring[k % ring.length]!.fill(k);
    return streamRecord('fill limit, uncached', size, count, (performance.now() - t0) / 1000, fmtBytes(size));
  } finally {
    for (const t of ring) t.release();
    mp.emptyCache(); // hundreds of MiB: not kept for the measurements after this one
  }
}

/** What tensorproc sends for one tensor of `size` under `strategy`: its bytes and descriptors. */
function frameOf(strategy: mp.SharingStrategy, size: number): { bytes: number; fds: number } {
  lib.setSharingStrategy(strategy);
  const t = lib.empty([size / 4], { shared: true });
  const f = encodeMessage(t);
  const shape = { bytes: f.bytes.length, fds: f.fds.length };
  f.abandon();
  t.release();
  lib.emptyCache();
  return shape;
}

async function anchor(cmd: string, args: string[], impl: string, size: number, count: number): Promise<StepRecord[]> {
  const rows = await runJsonLines(cmd, args);
  return rows.map((r) => streamRecord(impl, size, count, Number(r.seconds), fmtBytes(size)));
}

/** Rough seconds per step, from the yardstick's figures: only for the progress bar. */
const RATES: Record<string, number[]> = {
  tensorproc: [37_000, 30_000, 15_000, 850, 270],
  'torch file_descriptor': [2_000, 1_650, 1_000, 60, 16],
  'torch file_system': [4_900, 3_500, 960, 56, 12],
  'node fork': [45_000, 14_000, 1_270, 59, 7],
  'node worker-copy': [230_000, 38_000, 5_500, 140, 14],
  'node worker-transfer': [200_000, 38_000, 3_300, 235, 40],
  fill: [1_300_000, 275_000, 38_000, 1_240, 300],
  message: [400_000, 400_000],
};
const weight = (rate: string, i: number, count: number, startup: number): number => startup + count / (RATES[rate]![i] ?? 1_000);

/**
 * The sizes to run: all of them, or those TENSORPROC_BENCH_W1_SIZES names in bytes (`16777216,67108864`),
 * to look at some closely with the yardstick's counts.
 */
function sizesToRun(): number[] {
  const only = process.env.TENSORPROC_BENCH_W1_SIZES;
  if (!only) return SIZES;
  const wanted = only.split(',').map(Number);
  const unknown = wanted.filter((b) => !SIZES.includes(b));
  if (unknown.length) throw new Error(`TENSORPROC_BENCH_W1_SIZES: W1 has no size ${unknown.join(', ')} (its sizes: ${SIZES.join(', ')})`);
  return SIZES.filter((b) => wanted.includes(b));
}

export function steps(quick: boolean): Step[] {
  const { torch, any: python } = findPythons();
  const sizes = sizesToRun();
  // torch's absence the runner reports for every workload; this one is W1's own.
  if (!python)
    printNotMeasured('W1', 'message limit', 'it runs bench/anchors/message-limit.py, and no python3 is on PATH (nor /usr/bin/python3)');
  const out: Step[] = [];
  sizes.forEach((size) => {
    const i = SIZES.indexOf(size);
    const count = countFor(size, quick);
    const at = fmtBytes(size);
    for (const s of STRATEGIES) {
      out.push({
        label: `tensorproc ${s} ${at}`,
        weight: weight('tensorproc', i, count, 0.3),
        run: async () => [await runTensorproc(s, size, count)],
      });
    }
    if (torch && !quick) {
      for (const s of STRATEGIES) {
        const impl = `torch ${s}`;
        out.push({ label: `${impl} ${at}`, weight: weight(impl, i, count, 3), run: () => torchRun(torch.path, [s], [size], quick) });
      }
    }
    for (const kind of ['fork', 'worker-copy', 'worker-transfer']) {
      const impl = `node ${kind}`;
      out.push({
        label: `${impl} ${at}`,
        weight: weight(impl, i, count, 0.1),
        run: () => anchor(process.execPath, [anchorPath('node-ipc.js'), kind, String(size), String(count)], impl, size, count),
      });
    }
    // The limit is measured with the yardstick's count even by --quick: in one process, and
    // cheap (a twentieth of a second a size), it needs that many to be warm.
    const fillCount = countFor(size, false);
    out.push({ label: `fill limit ${at}`, weight: weight('fill', i, 2 * fillCount, 0), run: () => [fillLimit(size, fillCount)] });
    if (size >= FILL_JUDGED_MIN)
      out.push({
        label: `uncached fill limit ${at}`,
        weight: weight('fill', i, 2 * fillCount, 0.3),
        run: () => [uncachedFillLimit(size, fillCount)],
      });
    if (python && size <= MESSAGE_LIMIT_MAX) {
      for (const s of STRATEGIES) {
        const impl = `message limit ${s}`;
        out.push({
          label: `${impl} ${at}`,
          weight: weight('message', i, count, 0.05),
          run: () => {
            const f = frameOf(s, size);
            return anchor(python.path, [anchorPath('message-limit.py'), String(f.bytes), String(count), String(f.fds)], impl, size, count);
          },
        });
      }
    }
  });
  // --quick: one pair of torch processes serves every size of both strategies (torch-queue.py).
  if (torch && quick) {
    const w = STRATEGIES.reduce(
      (sum, s) => sum + sizes.reduce((t, size) => t + weight(`torch ${s}`, SIZES.indexOf(size), countFor(size, quick), 0), 0),
      5,
    );
    out.push({ label: 'torch, every size of both strategies', weight: w, run: () => torchRun(torch.path, STRATEGIES, sizes, quick) });
  }
  return out;
}

async function torchRun(python: string, strategies: readonly string[], sizes: number[], quick: boolean): Promise<StepRecord[]> {
  const args = [
    anchorPath('torch-queue.py'),
    strategies.join(','),
    ...(quick ? ['--one-pair'] : []),
    ...sizes.map((size) => `${size}:${countFor(size, quick)}`),
  ];
  const rows = await runJsonLines(python, args);
  return rows.map((r) => streamRecord(String(r.impl), Number(r.bytes), Number(r.count), Number(r.seconds), fmtBytes(Number(r.bytes))));
}

// Not awaited at top level: the bench runner imports this module for steps(), and an import of
// a module still in its top-level await would wait for the whole run.
if (process.argv[1] !== undefined && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const env = benchEnv();
  runWorkload('W1', steps(env.quick), env).then(
    () => mp.emptyCache(),
    (e: unknown) => {
      console.error(e);
      process.exitCode = 1;
    },
  );
}
