// Real NATS servers and tensorproc agents for the cluster tests (test/cluster/): servers on
// loopback on free ports (one, or a cluster of three with JetStream), agents as processes of
// their own with distinct host ids, so that two agents on one machine are two hosts.
// Everything is started by pid and stopped by pid in stop().
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { randomBytes, randomInt } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { running } from './procs.js';
import { waitFor } from './wait.js';

export const NATS_SERVER = '/usr/sbin/nats-server';
const CLI = fileURLToPath(new URL('../../src/cli/main.js', import.meta.url));

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });
}

/** Resolves once `child` writes a line matching `re` (on stdout or stderr); rejects if it exits first. */
export function waitForLine(child: ChildProcess, re: RegExp, what: string): Promise<string> {
  return new Promise((resolve, reject) => {
    let seen = '';
    const on = (b: Buffer): void => {
      seen += b.toString();
      const m = re.exec(seen);
      if (m) {
        child.stdout?.off('data', on);
        child.stderr?.off('data', on);
        child.off('exit', onExit);
        resolve(m[0]);
      }
    };
    const onExit = (code: number | null, signal: string | null): void =>
      reject(new Error(`${what} exited (${code ?? signal}) before it was ready:\n${seen}`));
    child.stdout?.on('data', on);
    child.stderr?.on('data', on);
    child.once('exit', onExit);
  });
}

export function exited(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((r) => child.once('exit', () => r()));
}

export interface NatsCluster {
  urls: string[];
  /** All the client URLs, comma-separated. */
  servers: string;
  procs: ChildProcess[];
  stop(): Promise<void>;
}

/** `nodes` nats-servers on loopback (3: one cluster, with JetStream), each ready when this resolves. */
/** `extra`: more configuration lines for each server (authorization { ... }). */
/** `host`: the address the servers listen on (0.0.0.0 for agents in network namespaces); URLs name `urlHost`. */
export async function startNats(
  nodes: 1 | 3 = 1,
  jetstream = nodes === 3,
  extra: string[] = [],
  host = '127.0.0.1',
  urlHost = '127.0.0.1',
): Promise<NatsCluster> {
  const dir = mkdtempSync(join(tmpdir(), 'tensorproc-nats-'));
  const ports = await Promise.all(Array.from({ length: nodes }, () => freePort()));
  const routes = nodes > 1 ? await Promise.all(Array.from({ length: nodes }, () => freePort())) : [];
  const procs: ChildProcess[] = [];
  try {
    for (let i = 0; i < nodes; i++) {
      const conf = [
        `server_name: n${i}`,
        `listen: ${host}:${ports[i]}`,
        jetstream ? `jetstream { store_dir: "${join(dir, `js${i}`)}" }` : '',
        nodes > 1
          ? `cluster { name: tp, listen: 127.0.0.1:${routes[i]}, routes: [${routes
              .filter((_, j) => j !== i)
              .map((p) => `nats://127.0.0.1:${p}`)
              .join(', ')}] }`
          : '',
        ...extra,
      ].join('\n');
      writeFileSync(join(dir, `n${i}.conf`), conf);
      const p = spawn(NATS_SERVER, ['-c', join(dir, `n${i}.conf`)], { stdio: ['ignore', 'pipe', 'pipe'] });
      procs.push(p);
    }
    await Promise.all(procs.map((p, i) => waitForLine(p, /Server is ready/, `nats-server ${i}`)));
  } catch (e) {
    for (const p of procs) p.kill('SIGKILL');
    await Promise.all(procs.map(exited));
    rmSync(dir, { recursive: true, force: true });
    throw e;
  }
  for (const p of procs) {
    p.stdout?.resume();
    p.stderr?.resume();
  }
  const urls = ports.map((p) => `nats://${urlHost}:${p}`);
  return {
    urls,
    servers: urls.join(','),
    procs,
    async stop() {
      for (const p of procs) p.kill('SIGTERM');
      await Promise.all(procs.map(exited));
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

export interface AgentProc {
  host: string;
  proc: ChildProcess;
  stop(): Promise<void>;
}

/** `npx tensorproc agent` as a process, its host id `host`; resolves once it is listening. */
export async function startAgent(servers: string, host: string, slots: number, root: string): Promise<AgentProc> {
  const proc = spawn(process.execPath, [CLI, 'agent', '--server', servers, '--slots', String(slots), '--host-id', host, '--root', root], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  await waitForLine(proc, /: ready/, `agent ${host}`);
  proc.stdout?.resume();
  proc.stderr?.resume();
  return {
    host,
    proc,
    async stop() {
      proc.kill('SIGTERM');
      await exited(proc);
    },
  };
}

// Hosts in network namespaces (issue 29: "hosts are agents in network namespaces of their own
// where root allows it"). Each host is a namespace `tp<run><i>` joined to the test's own
// namespace by a veth pair on a /30 of its own (10.<a>.<b>.1 here, .2 there); a process is
// started in it with `ip netns exec`, which execs it in place: its pid is the process's own,
// so it is stopped by pid as any other. remove() deletes the namespaces, which deletes their
// veth pairs with them; netnsNames() lets a test check that none is left.

export interface NetnsHost {
  /** The namespace's name. */
  ns: string;
  /** This side's address on the pair (where a server in the test's namespace listens). */
  hereIp: string;
  /** The host's address on the pair. */
  thereIp: string;
}

export interface NetnsHosts {
  hosts: NetnsHost[];
  remove(): void;
}

function ip(args: string[]): void {
  const r = spawnSync('ip', args, { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`ip ${args.join(' ')}: ${(r.stderr || r.error?.message || '').trim()}`);
}

/** The namespaces `ip netns list` shows, by name. */
export function netnsNames(): string[] {
  const r = spawnSync('ip', ['netns', 'list'], { encoding: 'utf8' });
  return r.status === 0
    ? r.stdout
        .split('\n')
        .map((l) => l.split(' ')[0]!)
        .filter((n) => n !== '')
    : [];
}

/**
 * `n` network namespaces joined to this one, or, where that cannot be (not root, no `ip netns`),
 * the reason as a string: the caller runs its hosts as plain processes and says why.
 */
export function makeNetnsHosts(n: number): NetnsHosts | string {
  if (process.getuid?.() !== 0) return 'not root: hosts run as plain processes';
  const run = randomBytes(3).toString('hex');
  const hosts: NetnsHost[] = [];
  const remove = (): void => {
    for (const h of hosts) spawnSync('ip', ['netns', 'delete', h.ns]);
    hosts.length = 0;
  };
  try {
    for (let i = 0; i < n; i++) {
      // 10.200-254.x.y/30: random per run, so that two runs side by side do not share a subnet.
      const a = 200 + randomInt(55);
      const b = randomInt(256);
      const c = randomInt(64) * 4;
      const h: NetnsHost = { ns: `tp${run}${i}`, hereIp: `10.${a}.${b}.${c + 1}`, thereIp: `10.${a}.${b}.${c + 2}` };
      const here = `tpv${run}${i}`;
      ip(['netns', 'add', h.ns]);
      hosts.push(h);
      ip(['link', 'add', here, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', h.ns]);
      ip(['addr', 'add', `${h.hereIp}/30`, 'dev', here]);
      ip(['link', 'set', here, 'up']);
      ip(['-n', h.ns, 'addr', 'add', `${h.thereIp}/30`, 'dev', 'eth0']);
      ip(['-n', h.ns, 'link', 'set', 'eth0', 'up']);
      ip(['-n', h.ns, 'link', 'set', 'lo', 'up']);
    }
  } catch (e) {
    remove();
    return `no network namespaces here (${(e as Error).message}): hosts run as plain processes`;
  }
  return { hosts, remove };
}

/** startAgent() in a network namespace (`ns`), or as a plain process where `ns` is null. */
export async function startAgentIn(ns: string | null, servers: string, host: string, slots: number, root: string): Promise<AgentProc> {
  if (ns === null) return startAgent(servers, host, slots, root);
  const argv = [CLI, 'agent', '--server', servers, '--slots', String(slots), '--host-id', host, '--root', root];
  const proc = spawn('ip', ['netns', 'exec', ns, process.execPath, ...argv], { stdio: ['ignore', 'pipe', 'pipe'] });
  await waitForLine(proc, /: ready/, `agent ${host} in ${ns}`);
  proc.stdout?.resume();
  proc.stderr?.resume();
  return {
    host,
    proc,
    async stop() {
      proc.kill('SIGTERM');
      await exited(proc);
    },
  };
}

/**
 * The head's death ends its workers on every host: starts `main` (a head program that prints
 * `{"pids":[...]}` once its workers run), lets `check` look at those pids, SIGKILLs the head,
 * and resolves once none of them runs (its own host's die with it; other hosts' agents stop
 * theirs when the head's lease lapses).
 */
export async function headDeathEndsWorkers(main: string, servers: string, root: string, check: (pids: number[]) => void): Promise<void> {
  const head = spawn(process.execPath, [main, servers, root], { stdio: ['ignore', 'pipe', 'inherit'] });
  try {
    const { pids } = JSON.parse(await waitForLine(head, /\{"pids".*\}\n/, 'the head')) as { pids: number[] };
    check(pids);
    head.kill('SIGKILL');
    await exited(head);
    await waitFor(() => pids.every((p) => !running(p)), 20_000);
  } finally {
    head.kill('SIGKILL');
    await exited(head);
  }
}
