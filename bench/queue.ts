// W1 (shared/YARDSTICK.md): one producer process, one consumer process, a queue between them.
// Per message the producer makes a fresh float32 tensor of SIZE bytes in shared memory, fills
// it and puts it; the consumer gets it, reads its first and last element and drops it
// (release(), JS's `del`). Consumer-side messages/s and GB/s from the 2nd message, for both
// sharing strategies, side by side in one run with the anchors: Node's child_process
// (advanced serialization) and worker_threads (copy, transfer) from node_ipc.mjs, and
// torch.multiprocessing from torch_queue.py when Debian's python3 has torch. Prints one JSON
// line per trial, then a markdown table of medians with ratios. "fill limit" is the
// producer's work alone (fillLimit()), measured in this process in the same run.
//
//   node dist/bench/queue.js [runs=3] [sizes=1024,65536,...] [--no-anchors] [--no-torch]
// The anchors are looked for in $TENSORPROC_ANCHORS, else ../shared/anchors beside the repo.
import { spawn as spawnChild } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { dirname, join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import * as mp from '../src/index.js';
import { fmtBytes, fmtNum, markdownTable, median } from './lib/stats.js';

const SIZES = [1 << 10, 64 << 10, 1 << 20, 16 << 20, 64 << 20];
const countFor = (size: number): number => Math.max(20, Math.min(5000, Math.floor((256 << 20) / size)));
/** As torch_queue.py: a bounded queue, so a fast producer waits instead of running ahead. */
const MAXSIZE = 64;

// --- the two children (one target, index 0 consumes, index 1 produces) ---------------------
export async function role(i: number, q: mp.Queue<mp.Tensor>, out: mp.Queue, size: number, count: number, strategy: mp.SharingStrategy): Promise<void> {
  mp.setSharingStrategy(strategy);
  const n = size / 4;
  if (i === 1) {
    for (let k = 0; k < count; k++) {
      const t = mp.empty([n], { shared: true });
      t.fill(k); // a real producer writes the whole tensor
      await q.put(t);
      t.release(); // the producer's `del t`
    }
    return;
  }
  let x = await q.get();
  let s = (x.get(0) as number) + (x.get(n - 1) as number);
  x.release();
  const t0 = performance.now();
  for (let k = 1; k < count; k++) {
    x = await q.get();
    s += (x.get(0) as number) + (x.get(n - 1) as number);
    x.release();
  }
  await out.put({ dt: (performance.now() - t0) / 1000, s });
}

interface Trial {
  impl: string;
  bytes: number;
  count: number;
  msgs_per_s: number;
  GB_per_s: number;
}

async function runTensorproc(strategy: mp.SharingStrategy, size: number): Promise<Trial> {
  const count = countFor(size);
  mp.setSharingStrategy(strategy); // as torch_queue.py's run() does, before starting the children
  const q = new mp.Queue<mp.Tensor>({ maxsize: MAXSIZE });
  const out = new mp.Queue<{ dt: number }>();
  try {
    const ctx = await mp.spawn({ module: import.meta.url, export: 'role' }, { args: [q, out, size, count, strategy], nprocs: 2, join: false });
    // A child that fails ends the wait with its error instead of leaving it hanging.
    const failed = (async () => {
      while (!(await ctx.join()));
      return null;
    })();
    const first = await Promise.race([out.get(), failed]);
    if (first === null) throw new Error('the W1 children exited without a result');
    const { dt } = first;
    await failed;
    const msgs = (count - 1) / dt;
    return { impl: `tensorproc ${strategy}`, bytes: size, count, msgs_per_s: msgs, GB_per_s: (msgs * size) / 1e9 };
  } finally {
    q.close();
    out.close();
  }
}

/**
 * The producer's side alone, in this process, with no queue: a fresh shared tensor per
 * message, filled, released, as role() makes them. What a message costs at least once the
 * code is warm (YARDSTICK.md: "the physical limit ... is the bandwidth of writing the tensor
 * once"); W1 can reach it only by overlapping everything else with the fill. Measured under
 * file_descriptor only: the strategy changes how a segment is named, not the memory that is
 * written, so it is the limit of both columns.
 */
function fillLimit(size: number): Trial {
  const count = countFor(size);
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
  const msgs = (count - 1) / ((performance.now() - t0) / 1000);
  return { impl: 'fill limit', bytes: size, count, msgs_per_s: msgs, GB_per_s: (msgs * size) / 1e9 };
}

/** Runs an anchor script and collects its JSON lines. */
function runLines(cmd: string, args: string[]): Promise<Record<string, unknown>[]> {
  return new Promise((resolvePromise, reject) => {
    const child = spawnChild(cmd, args, { stdio: ['ignore', 'pipe', 'inherit'] });
    const rows: Record<string, unknown>[] = [];
    createInterface({ input: child.stdout! }).on('line', (l) => {
      try {
        rows.push(JSON.parse(l));
      } catch {
        // not a result line
      }
    });
    child.on('error', reject);
    child.on('exit', (code) => (code === 0 ? resolvePromise(rows) : reject(new Error(`${cmd} ${args.join(' ')} exited with ${code}`))));
  });
}

function anchorsDir(): string | null {
  const here = dirname(fileURLToPath(import.meta.url));
  const candidates = [process.env.TENSORPROC_ANCHORS, resolve(here, '../../../shared/anchors'), resolve(here, '../../shared/anchors'), resolve(here, '../../bench/anchors')];
  for (const c of candidates) if (c && existsSync(join(c, 'node_ipc.mjs'))) return c;
  return null;
}

async function torchAvailable(): Promise<boolean> {
  return new Promise((r) => {
    const c = spawnChild('/usr/bin/python3', ['-c', 'import torch'], { stdio: 'ignore' });
    c.on('error', () => r(false));
    c.on('exit', (code) => r(code === 0));
  });
}

async function main(): Promise<void> {
  const argv = process.argv.slice(2);
  const flags = new Set(argv.filter((a) => a.startsWith('--')));
  const pos = argv.filter((a) => !a.startsWith('--'));
  const runs = Number(pos[0] ?? 3);
  const sizes = pos[1] ? pos[1].split(',').map(Number) : SIZES;
  const anchors = flags.has('--no-anchors') ? null : anchorsDir();
  const torch = anchors !== null && !flags.has('--no-torch') && (await torchAvailable());
  const results = new Map<string, number[]>(); // `${impl}|${bytes}` -> msgs/s per run
  const note = (t: Trial, run: number): void => {
    const key = `${t.impl}|${t.bytes}`;
    results.set(key, [...(results.get(key) ?? []), t.msgs_per_s]);
    console.log(JSON.stringify({ workload: 'W1', run, ...t, msgs_per_s: +t.msgs_per_s.toFixed(1), GB_per_s: +t.GB_per_s.toFixed(3) }));
  };
  for (let run = 0; run < runs; run++) {
    for (const strategy of ['file_descriptor', 'file_system'] as const) {
      for (const size of sizes) note(await runTensorproc(strategy, size), run);
    }
    for (const size of sizes) note(fillLimit(size), run);
    if (anchors !== null) {
      for (const row of await runLines(process.execPath, [join(anchors, 'node_ipc.mjs'), 'fork,worker-copy,worker-transfer', sizes.join(',')])) {
        note({ impl: String(row.impl), bytes: Number(row.bytes), count: Number(row.count), msgs_per_s: Number(row.msgs_per_s), GB_per_s: Number(row.GB_per_s) }, run);
      }
    }
    if (torch) {
      for (const row of await runLines('/usr/bin/python3', [join(anchors!, 'torch_queue.py'), 'file_descriptor,file_system', sizes.join(',')])) {
        note({ impl: `torch ${String(row.strategy)}`, bytes: Number(row.bytes), count: Number(row.count), msgs_per_s: Number(row.msgs_per_s), GB_per_s: Number(row.GB_per_s) }, run);
      }
    }
  }
  const impls = [...new Set([...results.keys()].map((k) => k.split('|')[0]!))];
  const med = (impl: string, size: number): number | undefined => {
    const xs = results.get(`${impl}|${size}`);
    return xs === undefined ? undefined : median(xs);
  };
  const cell = (x: number | undefined): string => (x === undefined ? '–' : fmtNum(x, x < 100 ? 1 : 0));
  const ratio = (a: number | undefined, b: number | undefined): string => (a === undefined || b === undefined ? '–' : `${fmtNum(a / b, 1)}x`);
  const share = (a: number | undefined, b: number | undefined): string => (a === undefined || b === undefined ? '–' : `${fmtNum((100 * a) / b, 0)}%`);
  const ratios: [string, string, string][] = [];
  if (impls.includes('torch file_descriptor')) ratios.push(['fd / torch fd', 'tensorproc file_descriptor', 'torch file_descriptor']);
  if (impls.includes('torch file_system')) ratios.push(['fs / torch fs', 'tensorproc file_system', 'torch file_system']);
  for (const a of ['node fork', 'node worker-copy', 'node worker-transfer']) if (impls.includes(a)) ratios.push([`fd / ${a.slice(5)}`, 'tensorproc file_descriptor', a]);
  ratios.push(['fd / fill limit', 'tensorproc file_descriptor', 'fill limit'], ['fs / fill limit', 'tensorproc file_system', 'fill limit']);
  console.log(`\nW1, messages/s (consumer side, median of ${runs} run${runs > 1 ? 's' : ''}; GB/s = messages/s x size)\n`);
  console.log(markdownTable(
    ['size', ...impls, ...ratios.map((r) => r[0])],
    sizes.map((size) => [fmtBytes(size), ...impls.map((i) => cell(med(i, size))), ...ratios.map(([, a, b]) => (b === 'fill limit' ? share : ratio)(med(a, size), med(b, size)))]),
  ));
  console.log('\nGB/s\n');
  console.log(markdownTable(['size', ...impls], sizes.map((size) => [fmtBytes(size), ...impls.map((i) => { const m = med(i, size); return m === undefined ? '–' : fmtNum((m * size) / 1e9, 2); })])));
}

// Not awaited at top level: spawn() imports this module (the children's target) to check
// it, and an import of a module still in its top-level await would wait for main() itself.
if (process.argv[1] !== undefined && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  main().catch((e) => {
    console.error(e);
    process.exitCode = 1;
  });
}
