// The CUDA workload (W-cuda): CUDA tensors between processes (docs/cuda.md). One producer hands a fresh device
// tensor to one consumer, which reads its first element and releases it; messages per second
// and the first message's latency, 1 MiB to 1 GiB, beside "copy" (a device-to-device clone of
// the same size in one process) and, where Python has CUDA torch, torch.multiprocessing doing
// the same (bench/anchors/torch-cuda.py). Then a host-to-device copy from pageable memory
// against one from a pinned shared segment (t.pinMemory(), NOTE [Pinned segments]). Runs only
// where CUDA is available; prints the reason and exits 0 otherwise. One JSON line per result.
//
//   node dist/bench/cuda.js [--quick] [--json FILE]
import { spawnSync } from 'node:child_process';
import { appendFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import * as mp from '../src/index.js';

const args = process.argv.slice(2);
const quick = args.includes('--quick');
const jsonAt = args.indexOf('--json');
const jsonFile = jsonAt >= 0 ? args[jsonAt + 1] : undefined;

function emit(o: Record<string, unknown>): void {
  const line = JSON.stringify({ bench: 'W-cuda', ...o });
  console.log(line);
  if (jsonFile !== undefined) appendFileSync(jsonFile, `${line}\n`);
}

/** The consumer: reads each tensor's first element, releases it, answers with the value. */
export async function consumer(_i: number, q: mp.Queue, back: mp.Queue): Promise<void> {
  for (;;) {
    const t = (await q.get()) as mp.Tensor | null;
    if (t === null) break;
    const head = await t.narrow(0, 0, 1).cpu();
    await back.put(Number(head.get(0)));
    t.release();
  }
  q.close();
  back.close();
}

async function handoff(): Promise<void> {
  const MiB = 2 ** 20;
  const free = mp.cuda.memGetInfo().free;
  const sizes = (quick ? [MiB, 64 * MiB] : [MiB, 64 * MiB, 1024 * MiB]).filter((s) => s * 6 < free);
  const counts: Record<number, number> = { [MiB]: quick ? 100 : 500, [64 * MiB]: quick ? 20 : 100, [1024 * MiB]: 20 };
  const q = new mp.Queue();
  const back = new mp.Queue();
  const ctx = mp.spawn({ module: import.meta.url, export: 'consumer' }, { args: [q, back], join: false });
  const warm = mp.full([256], 1, { device: 'cuda' });
  await q.put(warm);
  await back.get();
  warm.release();
  for (const bytes of sizes) {
    const n = counts[bytes]!;
    let first = 0;
    const t0 = performance.now();
    for (let i = 0; i < n; i++) {
      const t = mp.full([bytes / 4], i, { device: 'cuda' });
      const s = performance.now();
      await q.put(t);
      t.release();
      const v = await back.get();
      if (v !== i) throw new Error(`the consumer read ${v}, expected ${i}`);
      if (i === 0) first = performance.now() - s;
    }
    const total = (performance.now() - t0) / 1000;
    // "copy": what a handoff by copying would cost at least, one device-to-device clone.
    const src = mp.full([bytes / 4], 1, { device: 'cuda' });
    const c0 = performance.now();
    const reps = Math.min(n, 20);
    for (let i = 0; i < reps; i++) src.clone().release();
    await mp.cuda.synchronize();
    const copyMs = (performance.now() - c0) / reps;
    src.release();
    emit({
      case: 'handoff',
      impl: 'tensorproc',
      bytes,
      messages: n,
      msgs_per_s: +(n / total).toFixed(1),
      first_latency_ms: +first.toFixed(3),
      dtod_clone_ms: +copyMs.toFixed(3),
    });
  }
  await q.put(null);
  await ctx.join();
  q.close();
  back.close();
}

async function hostToDevice(): Promise<void> {
  const bytes = (quick ? 16 : 256) * 2 ** 20;
  const reps = quick ? 3 : 10;
  const pageable = mp.full([bytes / 4], 1);
  const pinned = mp.full([bytes / 4], 1).pinMemory();
  for (const [impl, host] of [
    ['pageable', pageable],
    ['pinned', pinned],
  ] as const) {
    (await host.cuda()).release(); // warm: the chunk is cached, the first touch paid
    const t0 = performance.now();
    for (let i = 0; i < reps; i++) (await host.cuda()).release();
    const s = (performance.now() - t0) / 1000 / reps;
    emit({ case: 'h2d', impl, bytes, gb_per_s: +(bytes / s / 1e9).toFixed(2) });
  }
  pageable.release();
  pinned.release();
}

function torchAnchor(): void {
  const script = fileURLToPath(new URL('../../bench/anchors/torch-cuda.py', import.meta.url));
  const r = spawnSync('python3', [script, ...(quick ? ['--quick'] : [])], { encoding: 'utf8', timeout: 120_000 });
  if (r.status !== 0) {
    emit({ case: 'torch', skipped: `python3 torch anchor did not run (${(r.stderr || r.error?.message || '').trim().split('\n').pop()})` });
    return;
  }
  for (const line of r.stdout.trim().split('\n')) if (line.startsWith('{')) emit(JSON.parse(line) as Record<string, unknown>);
}

async function main(): Promise<void> {
  if (!mp.cuda.isAvailable()) {
    emit({ skipped: `CUDA unavailable: ${mp.cuda.unavailableReason()}` });
    return;
  }
  const d = mp.cuda.status().devices[0]!;
  emit({ device: d.name, driver: mp.cuda.status().driverVersion, library: mp.cuda.status().library });
  await handoff();
  await hostToDevice();
  if (!args.includes('--no-torch')) torchAnchor();
  mp.cuda.emptyCache();
}

if (process.argv[1] === fileURLToPath(import.meta.url)) await main();
