// Real NATS servers and tensorproc agents for the cluster tests (test/cluster/): servers on
// loopback on free ports (one, or a cluster of three with JetStream), agents as processes of
// their own with distinct host ids, so that two agents on one machine are two hosts.
// Everything is started by pid and stopped by pid in stop().
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

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
export async function startNats(nodes: 1 | 3 = 1, jetstream = nodes === 3, extra: string[] = []): Promise<NatsCluster> {
  const dir = mkdtempSync(join(tmpdir(), 'tensorproc-nats-'));
  const ports = await Promise.all(Array.from({ length: nodes }, () => freePort()));
  const routes = nodes > 1 ? await Promise.all(Array.from({ length: nodes }, () => freePort())) : [];
  const procs: ChildProcess[] = [];
  try {
    for (let i = 0; i < nodes; i++) {
      const conf = [
        `server_name: n${i}`,
        `listen: 127.0.0.1:${ports[i]}`,
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
  const urls = ports.map((p) => `nats://127.0.0.1:${p}`);
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
