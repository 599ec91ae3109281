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
//    Node processes moving the same bytes one way with a 1-byte reply (goal: at least 0.5x),
//    and against the NATS client alone moving them through the same server in the parts the
//    cluster cuts (the engine's own ceiling here, measured in the same run).
//
//   node --expose-gc dist/bench/cluster.js        (or `tensorproc bench --only W5`)
// Records as NOTE [Bench records]; TENSORPROC_BENCH_QUICK=1 for fewer trials.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import { connect as natsConnect, type NatsConnection } from '@nats-io/transport-node';
import { Pool, full, type Tensor } from '../src/index.js';
import { PART_BYTES } from '../src/cluster/codec.js';
import { benchEnv, printNotMeasured, runWorkload, type Step, type StepRecord } from './lib/workload.js';

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

// 9, not 5: a warm map of 20,000 tiny tasks takes 13-60 ms here, and with 5 trials one slow
// round moved the median ratio between 1.0x and 1.9x from one run to the next.
const TRIALS = env.quick ? 1 : 9;
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
// W5 (b): host 'r' is a network namespace of its own (as root; else a plain process, said in
// the records), joined to this one by a veth pair: a server of its own here on this side's
// address, agent 'r' there; raw TCP is a Node echo process there, torch.distributed.rpc
// (anchors/torch-rpc.py, TensorPipe held to TCP) a rank there. Each trial moves `count`
// tensors one way with a small reply, the three interleaved, TRIALS times a run.
const remote = await remoteHost();
const B_TRIALS = env.smoke ? 1 : 3;
async function remoteHost() {
  const run = `${process.pid % 10000}`;
  const ns = `tpw5${run}`;
  const dev = `tpw5v${run}`;
  const sh = (args: string[]) => spawnSync('ip', args, { encoding: 'utf8' });
  const cmds = [
    ['netns', 'add', ns],
    ['link', 'add', dev, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', ns],
    ['addr', 'add', '10.253.77.1/30', 'dev', dev],
    ['link', 'set', dev, 'up'],
    ['-n', ns, 'addr', 'add', '10.253.77.2/30', 'dev', 'eth0'],
    ['-n', ns, 'link', 'set', 'eth0', 'up'],
    ['-n', ns, 'link', 'set', 'lo', 'up'],
  ];
  let why: string | null = process.getuid?.() === 0 ? null : 'not root';
  for (const c of why ? [] : cmds) {
    const r = sh(c);
    if (r.status !== 0) {
      why = `ip ${c.join(' ')}: ${r.stderr.trim()}`;
      sh(['netns', 'delete', ns]);
      break;
    }
  }
  return why === null
    ? { ns, here: '10.253.77.1', there: '10.253.77.2', hereDev: dev, thereDev: 'eth0', why, remove: () => sh(['netns', 'delete', ns]) }
    : { ns: null, here: '127.0.0.1', there: '127.0.0.1', hereDev: 'lo', thereDev: 'lo', why, remove: () => {} };
}
/** `argv` in host r: in its namespace, or here. */
function inR(argv: string[], opts: Parameters<typeof spawn>[2]): ChildProcess {
  return remote.ns === null ? spawn(argv[0]!, argv.slice(1), opts) : spawn('ip', ['netns', 'exec', remote.ns, ...argv], opts);
}
const where = remote.ns ? `network namespace ${remote.ns} over a veth pair` : `a plain process (${remote.why})`;

let bServer: ChildProcess | null = null;
let bAgent: ChildProcess | null = null;
let echo: ChildProcess | null = null;
let bPool: Pool | null = null;
let echoPort = 0;
let natsEcho: ChildProcess | null = null;
let natsHead: NatsConnection | null = null;
async function setUpB(): Promise<void> {
  if (bPool) return;
  bServer = spawn(NATS, ['-a', remote.here, '-p', '-1'], { stdio: ['ignore', 'ignore', 'pipe'] });
  const bUrl = `nats://${await lineOf(bServer, bServer.stderr!, new RegExp(`${remote.here.replaceAll('.', '\\.')}:\\d+`))}`;
  bServer.stderr!.resume();
  bAgent = inR([process.execPath, CLI, 'agent', '--server', bUrl, '--slots', '1', '--host-id', 'r', '--root', root], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  await lineOf(bAgent, bAgent.stdout!, /: ready/);
  bAgent.stdout!.resume();
  echo = inR(
    [
      process.execPath,
      '-e',
      `const s=require('net').createServer(c=>{c.setNoDelay(true);let n=0,b=0;c.on('data',d=>{if(!b){b=d.readUInt32LE(0);d=d.subarray(4);}n+=d.length;while(b&&n>=b){n-=b;c.write('k');}})});s.listen(0,'${remote.there}',()=>console.log(s.address().port));`,
    ],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  echoPort = Number(await lineOf(echo, echo.stdout!, /^\d+$/));
  // NATS alone: the same client and server as the cluster, none of its code.
  writeFileSync(
    join(root, 'nats-echo.mjs'),
    `import { connect } from ${JSON.stringify(import.meta.resolve('@nats-io/transport-node'))};
const nc = await connect({ servers: process.argv[2] });
let want = 0, have = 0;
nc.subscribe('w5raw.size', { callback: (_e, m) => { want = Number(m.string()); have = 0; } });
nc.subscribe('w5raw.data', { callback: (_e, m) => {
  have += m.data.length;
  while (have >= want) { have -= want; nc.publish('w5raw.ack'); }
} });
await nc.flush();
console.log('ready');
`,
  );
  natsEcho = inR([process.execPath, join(root, 'nats-echo.mjs'), bUrl], { stdio: ['ignore', 'pipe', 'inherit'] });
  await lineOf(natsEcho, natsEcho.stdout!, /^ready$/);
  natsHead = await natsConnect({ servers: bUrl });
  // The head says it is host 'h', which has no agent on this server: the worker is on host 'r'.
  bPool = new Pool({ processes: 1, cluster: { servers: bUrl, root, hostId: 'h' } });
}
async function tearDownB(): Promise<void> {
  await bPool?.[Symbol.asyncDispose]();
  await natsHead?.close();
  for (const p of [bAgent, echo, natsEcho, bServer]) if (p) await stop(p);
  remote.remove();
}

/** Raw TCP to host r: `count` messages of `bytes` one way on one connection, a 1-byte reply each. */
async function rawTcp(bytes: number, count: number): Promise<number> {
  const sock = connect(echoPort, remote.there);
  sock.setNoDelay(true);
  await once(sock, 'connect');
  const size = Buffer.alloc(4);
  size.writeUInt32LE(bytes, 0);
  sock.write(size);
  const buf = Buffer.alloc(bytes, 1);
  const one = async () => {
    const reply = once(sock, 'data');
    sock.write(buf);
    await reply;
  };
  await one();
  const s = await timed(async () => {
    for (let i = 0; i < count; i++) await one();
  });
  sock.destroy();
  return s;
}

/** The NATS client alone to host r: `count` tensors' bytes in the cluster's parts, a reply each. */
async function natsAlone(bytes: number, count: number): Promise<number> {
  const nc = natsHead!;
  nc.publish('w5raw.size', String(bytes)); // ordered before the data: one connection each way
  const acks = nc.subscribe('w5raw.ack')[Symbol.asyncIterator]();
  const part = Buffer.alloc(PART_BYTES, 1);
  const one = async () => {
    for (let left = bytes; left > 0; left -= PART_BYTES) nc.publish('w5raw.data', left >= PART_BYTES ? part : part.subarray(0, left));
    await acks.next();
  };
  await one();
  const s = await timed(async () => {
    for (let i = 0; i < count; i++) await one();
  });
  await acks.return?.();
  return s;
}

async function clusterSend(bytes: number, count: number): Promise<number> {
  const t = full([bytes / 4], 1, { dtype: 'float32', shared: true });
  await bPool!.apply(T('nbytes'), [t]);
  return timed(async () => {
    for (let i = 0; i < count; i++) await bPool!.apply(T('nbytes'), [t]);
  });
}

/** torch.distributed.rpc between this namespace and host r's: seconds per size, or why not. */
async function torchRpc(plan: [number, number][]): Promise<Map<number, number> | string> {
  const py = '/usr/bin/python3';
  const script = fileURLToPath(new URL('../../bench/anchors/torch-rpc.py', import.meta.url));
  if (!existsSync(py) || !existsSync(script)) return `no ${py} or ${script}`;
  const port = String(20000 + (process.pid % 20000));
  const specs = plan.map(([b, c]) => `${b}:${c}`);
  const rank1 = inR([py, script, '1', remote.here, port], {
    stdio: ['ignore', 'ignore', 'pipe'],
    env: { ...process.env, TP_SOCKET_IFNAME: remote.thereDev, GLOO_SOCKET_IFNAME: remote.thereDev },
  });
  const rank0 = spawn(py, [script, '0', remote.here, port, ...specs], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, TP_SOCKET_IFNAME: remote.hereDev, GLOO_SOCKET_IFNAME: remote.hereDev },
  });
  let err = '';
  rank0.stderr!.on('data', (d) => (err += d));
  rank1.stderr!.on('data', (d) => (err += d));
  const out = new Map<number, number>();
  for await (const line of createInterface({ input: rank0.stdout! })) {
    const r = JSON.parse(line) as { bytes: number; seconds: number };
    out.set(r.bytes, r.seconds);
  }
  await Promise.all([rank0, rank1].map((p) => (p.exitCode === null && p.signalCode === null ? once(p, 'exit') : null)));
  return out.size === plan.length ? out : `torch rpc did not run here: ${err.trim().split('\n').slice(-2).join(' ')}`;
}

const sizes = [1, 16].map((mib) => ({ mib, count: Math.max(4, Math.round((env.smoke ? 8 : env.quick ? 64 : 256) / mib)) }));
steps.push({
  label: 'tensors to another host: cluster, raw TCP, torch rpc',
  weight: 20,
  async run() {
    await setUpB();
    const out: StepRecord[] = [];
    const med = (xs: number[]) => [...xs].sort((x, y) => x - y)[xs.length >> 1]!;
    for (const { mib, count } of sizes) {
      const bytes = mib * 2 ** 20;
      const c: number[] = [];
      const r: number[] = [];
      const n: number[] = [];
      for (let i = 0; i < B_TRIALS; i++) {
        c.push(await clusterSend(bytes, count));
        r.push(await rawTcp(bytes, count));
        n.push(await natsAlone(bytes, count));
      }
      const rate = (x: number) => (count * mib) / x;
      const [cr, rr, nr] = [rate(med(c)), rate(med(r)), rate(med(n))];
      out.push(
        { impl: 'cluster Pool, tensor to host r', case: `${mib} MiB`, value: cr, unit: 'MiB/s', better: 'higher', count },
        { impl: 'raw TCP, Node to Node', case: `${mib} MiB`, value: rr, unit: 'MiB/s', better: 'higher', count },
        { impl: 'NATS client alone, same server and parts', case: `${mib} MiB`, value: nr, unit: 'MiB/s', better: 'higher', count },
      );
      // The goal is against raw TCP; NATS alone is the most any design on this engine could reach.
      console.error(
        `W5 (b) ${mib} MiB: cluster ${cr.toFixed(0)} MiB/s, raw TCP ${rr.toFixed(0)} MiB/s: ${(cr / rr).toFixed(2)}x; ` +
          `NATS alone ${nr.toFixed(0)} MiB/s (${(nr / rr).toFixed(2)}x raw TCP; the cluster ${(cr / nr).toFixed(2)}x of it) (host r: ${where})`,
      );
    }
    const torch = await torchRpc(sizes.map(({ mib, count }) => [mib * 2 ** 20, count]));
    if (typeof torch === 'string') printNotMeasured('W5', 'torch.distributed.rpc (TensorPipe, TCP)', torch);
    else
      for (const { mib, count } of sizes)
        out.push({
          impl: 'torch.distributed.rpc (TensorPipe, TCP)',
          case: `${mib} MiB`,
          value: (count * mib) / torch.get(mib * 2 ** 20)!,
          unit: 'MiB/s',
          better: 'higher',
          count,
        });
    return out;
  },
});

try {
  await runWorkload('W5', steps, env);
} finally {
  await tearDownB();
  await stop(server);
  rmSync(root, { recursive: true, force: true });
}
