// W6 (issue 28): a Node producer and a Python consumer, the W1 loop (bench/queue.ts): per
// message the producer makes a fresh float32 tensor of SIZE bytes in shared memory, fills it
// and puts it; the consumer (w6-consumer.py, the Python package of python/) gets it as a numpy
// array, reads its first and last element and drops it. Beside it in the same run, size by
// size: what people use today, the same tensors as bytes over a Unix socket (length-prefixed,
// copied into a fresh buffer per message), torch's own Queue between two Python processes
// (anchors/torch-queue.py), and tensorproc's Node -> Node over the same loop (the W1 consumer,
// lib/w1-role.ts), for each strategy. Consumer-side messages/s from the 2nd message. Records as
// NOTE [Bench records]; bars as verdicts.ts (issue 28: at every size at least 0.7x Node -> Node,
// from 1 MiB at least 10x the socket copy).
//
//   tensorproc bench --only W6      or, alone:      node --expose-gc dist/bench/python.js [--quick]
import { spawn, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createServer } from 'node:net';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type * as mp from 'tensorproc';
import * as lib from '../src/index.js';
import { reductionFor } from '../src/transport/registry.js';
import { findPythons } from './lib/programs.js';
import { benchEnv, printNotMeasured, runWorkload, streamRecord, type Step, type StepRecord } from './lib/workload.js';

const env = benchEnv();
const quick = env.quick || process.argv.includes('--quick');
const SIZES = process.env.W6_SIZES ? process.env.W6_SIZES.split(',').map(Number) : [1 << 10, 64 << 10, 1 << 20, 16 << 20, 64 << 20];
const clamp = (x: number, lo: number, hi: number): number => Math.max(lo, Math.min(hi, Math.floor(x)));
const countFor = (size: number): number =>
  env.smoke ? clamp(2 ** 20 / size, 4, 50) : quick ? clamp(2 ** 25 / size, 10, 2000) : clamp(2 ** 30 / size, 40, 50_000);
const MAXSIZE = 64;
const repo = fileURLToPath(new URL('../../', import.meta.url));
const consumerPy = join(repo, 'bench/w6-consumer.py');
const torchQueuePy = join(repo, 'bench/anchors/torch-queue.py');
const { torch, any } = findPythons();
const python = torch?.path ?? any?.path ?? 'python3';
// W6_PYTHONPATH: another copy of the package (an A/B against main's python/, in one run).
const pyEnv = { ...process.env, PYTHONPATH: process.env.W6_PYTHONPATH ?? join(repo, 'python') };

interface Line {
  bytes: number;
  count: number;
  seconds: number;
}

function queueFds(q: unknown): number[] {
  // The package's Queue and the library's are one class only in the bundle; reduce through the
  // copy that made it (the package's, whose registry is its own).
  const r = reductionFor(q as object);
  if (r === undefined) throw new Error('not a queue of this library copy');
  return (r.reduce(q as object, { copies: 1, fd: (fd: number) => fd, ref: () => 0, onAbandon: () => {} }) as number[]).slice(1);
}

async function produce(q: lib.Queue<lib.Tensor>, size: number, count: number): Promise<void> {
  const n = size / 4;
  for (let k = 0; k < count; k++) {
    const t = lib.empty([n], { shared: true });
    t.fill(k);
    await q.put(t);
    t.release();
  }
}

async function linesOf(proc: ReturnType<typeof spawn>, n: number): Promise<Line[]> {
  const out: Line[] = [];
  const rl = createInterface({ input: proc.stdout! });
  for await (const line of rl) {
    out.push(JSON.parse(line) as Line);
    if (out.length === n) break;
  }
  return out;
}

async function nodeToPython(strategy: mp.SharingStrategy, size: number, count: number): Promise<number> {
  lib.setSharingStrategy(strategy);
  const q = new lib.Queue<lib.Tensor>({ maxsize: MAXSIZE });
  const proc = spawn(
    python,
    [...(process.env.W6_PROFILE ? ['-m', 'cProfile', '-o', '/tmp/w6.prof'] : []), consumerPy, 'tensorproc', `${size}:${count}`],
    {
      stdio: ['ignore', 'pipe', 'inherit', ...queueFds(q)],
      env: { ...pyEnv, TENSORPROC_SHARING_STRATEGY: strategy },
    },
  );
  try {
    const [lines] = await Promise.all([linesOf(proc, 1), produce(q, size, count)]);
    await once(proc, 'exit');
    return (count - 1) / lines[0]!.seconds;
  } finally {
    if (proc.exitCode === null) proc.kill('SIGKILL');
    q.close();
  }
}

async function nodeToNode(strategy: mp.SharingStrategy, size: number, count: number): Promise<number> {
  lib.setSharingStrategy(strategy);
  const q = new lib.Queue<lib.Tensor>({ maxsize: MAXSIZE });
  const out = new lib.Queue<{ dt: number }>();
  try {
    const ctx = lib.spawn(
      { module: new URL('./lib/w1-role.js', import.meta.url), export: 'role' },
      { args: [q, out, size, count, strategy], nprocs: 1, join: false },
    );
    const [r] = await Promise.all([out.get(), produce(q, size, count)]);
    await ctx.join();
    return (count - 1) / r.dt;
  } finally {
    q.close();
    out.close();
  }
}

async function socketCopy(size: number, count: number): Promise<number> {
  const path = join(tmpdir(), `tp-w6-${process.pid}.sock`);
  const server = createServer();
  server.listen(path);
  await once(server, 'listening');
  const proc = spawn(python, [consumerPy, 'socket', path, `${size}:${count}`], { stdio: ['ignore', 'pipe', 'inherit'], env: pyEnv });
  try {
    const [conn] = (await once(server, 'connection')) as [import('node:net').Socket];
    const result = linesOf(proc, 1);
    const n = size / 4;
    for (let k = 0; k < count; k++) {
      const a = new Float32Array(n).fill(k); // the same tensor, as bytes
      const head = Buffer.alloc(8);
      head.writeBigUInt64LE(BigInt(size));
      conn.write(head);
      if (!conn.write(Buffer.from(a.buffer))) await once(conn, 'drain');
    }
    const [line] = await result;
    conn.end();
    return (count - 1) / line!.seconds;
  } finally {
    if (proc.exitCode === null) proc.kill('SIGKILL');
    server.close();
  }
}

function torchQueue(size: number, count: number): number | null {
  if (torch === null) return null;
  const r = spawnSync(torch.path, [torchQueuePy, 'file_descriptor', `${size}:${count}`], { encoding: 'utf8', timeout: 300_000 });
  const line = r.stdout?.split('\n').find((l) => l.startsWith('{'));
  if (!line) return null;
  const { seconds } = JSON.parse(line) as Line;
  return (count - 1) / seconds;
}

const fmtSize = (b: number): string => (b >= 1 << 20 ? `${b >> 20} MiB` : `${b >> 10} KiB`);

/** Why W6 cannot run here, or null: it needs a python3 with numpy and the repository's python/ and bench/ files. */
function missing(): string | null {
  if (!existsSync(consumerPy) || !existsSync(join(repo, 'python/tensorproc/__init__.py')))
    return 'the Python package and W6 consumer are not in this install: run W6 from a clone of the repository';
  const r = spawnSync(python, ['-c', 'import numpy'], { encoding: 'utf8' });
  return r.status === 0 ? null : `${python} cannot import numpy (Debian: apt-get install python3-numpy)`;
}

const steps: Step[] = SIZES.map((size) => ({
  label: `Node -> Python, ${fmtSize(size)}`,
  weight: 5,
  async run(): Promise<StepRecord[]> {
    const count = countFor(size);
    const rec = (impl: string, msgsPerS: number): StepRecord => streamRecord(impl, size, count, (count - 1) / msgsPerS, fmtSize(size));
    const out: StepRecord[] = [];
    for (const strategy of ['file_descriptor', 'file_system'] as const) {
      out.push(rec(`tensorproc ${strategy}`, await nodeToPython(strategy, size, count)));
      out.push(rec(`Node -> Node ${strategy}`, await nodeToNode(strategy, size, count)));
      lib.emptyCache();
    }
    out.push(rec('bytes over a Unix socket', await socketCopy(size, count)));
    const tq = torchQueue(size, count);
    if (tq !== null) out.push(rec('torch Queue, Python -> Python', tq));
    return out;
  },
}));

const why = missing();
if (why !== null)
  console.log(JSON.stringify({ workload: 'W6', not_measured: why })); // the whole workload (NOTE [Bench records])
else {
  if (torch === null) printNotMeasured('W6', 'torch Queue, Python -> Python', 'no python3 on PATH imports torch');
  await runWorkload('W6', steps, env);
}
