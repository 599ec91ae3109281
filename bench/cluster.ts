// W5 (issue 29): the Pool on a cluster (docs/cluster.md), side by side with what it must not
// lose to. One nats-server on loopback and agents as processes of their own, with host ids:
//  - (a) a cluster Pool of 2 whose workers all sit on the head's host (agent 'h', the head's
//    own host id: NOTE [Same-host slots]) against the local Pool of 2, on W3's cases (20,000
//    tiny tasks at chunksize 1, 200,000 at the default chunksize, 500 tasks returning a fresh
//    1 MiB float32 tensor: bench/lib/w3-tasks.ts for both pools) (goal: at most 1.05x the local
//    Pool's time). Both pools are kept and warmed; each trial times one call of each, which
//    goes first alternating, and the ratio is of the medians;
//  - 1 MiB and 16 MiB tensors sent to a worker on another host (agent 'r', a process with a
//    host id of its own: its own copy into its own shared memory) against raw TCP between two
//    Node processes moving the same bytes one way with a 1-byte reply (goal: at least 0.5x).
//
//   node --expose-gc dist/bench/cluster.js        (or `tensorproc bench --only W5`)
// Records as NOTE [Bench records]; TENSORPROC_BENCH_QUICK=1 for fewer trials.
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import { Pool, full, type Tensor } from '../src/index.js';
import { benchEnv, runWorkload, type Step, type StepRecord } from './lib/workload.js';

const env = benchEnv();
const NATS = '/usr/sbin/nats-server';
if (!existsSync(NATS)) {
  console.log(JSON.stringify({ workload: 'W5', not_measured: `no ${NATS} (apt-get install nats-server)` }));
  process.exit(0);
}
const CLI = fileURLToPath(new URL('../src/cli/main.js', import.meta.url));
const root = mkdtempSync(join(tmpdir(), 'tensorproc-bench-w5-'));
writeFileSync(
  join(root, 'w5.mjs'),
  `export const square = (x) => x * x;
export function spin(ms) { const t = performance.now(); while (performance.now() - t < ms); return ms; }
export const nbytes = (t) => t.data.byteLength;
`,
);
const T = (name: string) => ({ module: join(root, 'w5.mjs'), export: name });

async function lineOf(p: ChildProcess, stream: NodeJS.ReadableStream, re: RegExp): Promise<string> {
  for await (const line of createInterface({ input: stream })) {
    const m = re.exec(line);
    if (m) return m[0];
  }
  throw new Error(`process ${p.pid} ended before printing ${re}`);
}

const server = spawn(NATS, ['-a', '127.0.0.1', '-p', '-1'], { stdio: ['ignore', 'ignore', 'pipe'] });
const url = `nats://${await lineOf(server, server.stderr!, /127\.0\.0\.1:\d+/)}`;
server.stderr!.resume();
async function agent(host: string, slots: number, dir = root): Promise<ChildProcess> {
  const p = spawn(process.execPath, [CLI, 'agent', '--server', url, '--slots', String(slots), '--host-id', host, '--root', dir], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  await lineOf(p, p.stdout!, /: ready/);
  p.stdout!.resume();
  return p;
}
async function stop(p: ChildProcess): Promise<void> {
  p.kill('SIGTERM');
  if (p.exitCode === null && p.signalCode === null) await once(p, 'exit');
}

const TRIALS = env.quick ? 1 : 5;
const W3 = fileURLToPath(new URL('./lib/', import.meta.url)); // w3-tasks.js: the (a) cases' code root
const W3T = (name: string) => ({ module: join(W3, 'w3-tasks.js'), export: name });
const SCALE = env.quick ? 10 : 1;

async function timed(fn: () => Promise<unknown>): Promise<number> {
  const t0 = performance.now();
  await fn();
  return (performance.now() - t0) / 1000;
}

/** Median seconds of `TRIALS` calls of each pool, interleaved (which goes first alternates); their ratio. */
async function poolCase(name: string, run: (p: Pool) => Promise<unknown>, local: Pool, cluster: Pool): Promise<StepRecord[]> {
  await run(local); // warm: workers started, modules loaded, V8's code for the call
  await run(cluster);
  const a: number[] = [];
  const b: number[] = [];
  for (let i = 0; i < TRIALS; i++) {
    if (i % 2 === 0) {
      a.push(await timed(() => run(local)));
      b.push(await timed(() => run(cluster)));
    } else {
      b.push(await timed(() => run(cluster)));
      a.push(await timed(() => run(local)));
    }
  }
  const med = (xs: number[]) => [...xs].sort((x, y) => x - y)[xs.length >> 1]!;
  return [
    { impl: 'local Pool', case: name, value: med(a), unit: 's', better: 'lower', count: TRIALS },
    { impl: 'cluster Pool, all on this host', case: name, value: med(b), unit: 's', better: 'lower', count: TRIALS },
    { impl: 'cluster / local', case: name, value: med(b) / med(a), unit: 'x', better: 'lower' },
  ];
}

/** Raw TCP between two Node processes: `count` messages of `bytes` one way, a 1-byte reply each. */
async function rawTcp(bytes: number, count: number): Promise<number> {
  const echo = spawn(
    process.execPath,
    [
      '-e',
      `const s=require('net').createServer(c=>{let n=0;c.on('data',d=>{n+=d.length;while(n>=${bytes}){n-=${bytes};c.write('k');}})});s.listen(0,'127.0.0.1',()=>console.log(s.address().port));`,
    ],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  const port = Number(await lineOf(echo, echo.stdout!, /^\d+$/));
  const sock = connect(port, '127.0.0.1');
  sock.setNoDelay(true);
  await once(sock, 'connect');
  const buf = Buffer.alloc(bytes, 1);
  const t0 = performance.now();
  for (let i = 0; i < count; i++) {
    const reply = once(sock, 'data');
    sock.write(buf);
    await reply;
  }
  const s = (performance.now() - t0) / 1000;
  sock.destroy();
  await stop(echo);
  return s;
}

const steps: Step[] = [];
let local: Pool;
let cluster: Pool;
let agentH: ChildProcess;
steps.push({
  label: 'cluster Pool on this host vs local Pool',
  weight: 10,
  async run() {
    agentH = await agent('h', 2, W3);
    local = new Pool({ processes: 2 });
    cluster = new Pool({ processes: 2, cluster: { servers: url, root: W3, hostId: 'h' } });
    const tiny = Array.from({ length: 20_000 / SCALE }, (_, i) => i);
    const many = Array.from({ length: 200_000 / SCALE }, (_, i) => i);
    const tensors = Array.from({ length: 500 / SCALE }, (_, i) => i);
    const out = [
      ...(await poolCase(`${tiny.length} tiny tasks, chunksize 1`, (p) => p.map(W3T('square'), tiny, { chunksize: 1 }), local, cluster)),
      ...(await poolCase(`${many.length} tiny tasks, default chunksize`, (p) => p.map(W3T('square'), many), local, cluster)),
      ...(await poolCase(
        `${tensors.length} fresh 1 MiB tensor results`,
        async (p) => {
          const ts = await p.map<Tensor>(W3T('freshTensor'), tensors);
          for (const t of ts) t.release();
        },
        local,
        cluster,
      )),
    ];
    await Promise.all([local[Symbol.asyncDispose](), cluster[Symbol.asyncDispose]()]);
    await stop(agentH);
    return out;
  },
});
for (const mib of [1, 16]) {
  steps.push({
    label: `${mib} MiB to another host vs raw TCP`,
    weight: 8,
    async run() {
      const count = Math.max(4, Math.round((env.quick ? 64 : 256) / mib));
      const agentR = await agent('r', 1);
      // The head says it is host 'h', which has no agent now: the worker is on host 'r'.
      const pool = new Pool({ processes: 1, cluster: { servers: url, root, hostId: 'h' } });
      const t = full([(mib * 2 ** 20) / 4], 1, { dtype: 'float32', shared: true });
      await pool.apply(T('nbytes'), [t]);
      const s = await timed(async () => {
        for (let i = 0; i < count; i++) await pool.apply(T('nbytes'), [t]);
      });
      await pool[Symbol.asyncDispose]();
      await stop(agentR);
      const tcp = await rawTcp(mib * 2 ** 20, count);
      const rate = (x: number) => (count * mib) / x;
      return [
        { impl: 'cluster Pool, tensor to host r', case: `${mib} MiB`, value: rate(s), unit: 'MiB/s', better: 'higher', count },
        { impl: 'raw TCP, Node to Node', case: `${mib} MiB`, value: rate(tcp), unit: 'MiB/s', better: 'higher', count },
      ];
    },
  });
}

try {
  await runWorkload('W5', steps, env);
} finally {
  await stop(server);
  rmSync(root, { recursive: true, force: true });
}
