// The harness of the Python peer's tests: which python runs them, and a peer process (peer.py)
// handed two Queues by inherited descriptors, as a channel any two programs could share.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import * as mp from '../../src/index.js';
import { reductionFor } from '../../src/transport/registry.js';

export const repo = fileURLToPath(new URL('../../../', import.meta.url));
export const peerScript = `${repo}test/python/peer.py`;

function probe(python: string, code: string): boolean {
  return spawnSync(python, ['-c', code], { stdio: 'ignore', timeout: 60_000 }).status === 0;
}

/**
 * TENSORPROC_PYTHON, else the README's venv (.venv/bin/python), else the first python3 with
 * numpy; null when none has it. The package is taken from this tree (PYTHONPATH) either way.
 */
export const python: string | null = (() => {
  const given = process.env.TENSORPROC_PYTHON;
  if (given) return given;
  for (const p of [`${repo}.venv/bin/python`, '/usr/bin/python3', 'python3']) {
    if ((p.startsWith('/') ? existsSync(p) : true) && probe(p, 'import numpy')) return p;
  }
  return null;
})();
export const noPython = python === null ? 'no python3 with numpy here (apt-get install python3-numpy: see README, Python)' : undefined;
export const hasTorch = python !== null && probe(python, 'import torch');

export function pythonEnv(strategy: mp.SharingStrategy): NodeJS.ProcessEnv {
  return { ...process.env, PYTHONPATH: `${repo}python`, TENSORPROC_SHARING_STRATEGY: strategy, PYTHONDONTWRITEBYTECODE: '1' };
}

/** The descriptors a Queue is made of ([send, recv, state]), as its reduction lists them; borrowed. */
export function queueFds(q: mp.Queue<unknown>): number[] {
  const r = reductionFor(q)!;
  const state = r.reduce(q, { copies: 1, fd: (fd: number) => fd, ref: () => 0, onAbandon: () => {} }) as number[];
  return state.slice(1);
}

export interface Peer {
  readonly proc: ChildProcess;
  readonly toPy: mp.Queue<unknown>;
  readonly fromPy: mp.Queue<unknown>;
  /** Sends a request and waits for the answer. */
  ask<T = unknown>(msg: unknown): Promise<T>;
  stderr(): string;
  /** Asks it to exit and waits for that; or kills it. */
  close(): Promise<void>;
  exited: Promise<number | null>;
}

export function startPeer(strategy: mp.SharingStrategy, script = peerScript, args: string[] = []): Peer {
  const toPy = new mp.Queue<unknown>();
  const fromPy = new mp.Queue<unknown>();
  const fds = [...queueFds(toPy), ...queueFds(fromPy)];
  const proc = spawn(python!, [script, ...args], {
    stdio: ['ignore', 'inherit', 'pipe', ...fds],
    env: pythonEnv(strategy),
  });
  let err = '';
  proc.stderr!.setEncoding('utf8').on('data', (d: string) => (err += d));
  const exited = new Promise<number | null>((resolve) => proc.on('exit', (code) => resolve(code)));
  // A peer that dies answers nothing: a get waiting for it fails with its stderr instead of hanging.
  const died = exited.then((code) => {
    throw new Error(`the python peer exited (${code ?? proc.signalCode}): ${err}`);
  });
  died.catch(() => {});
  const ask = async <T>(msg: unknown): Promise<T> => {
    await toPy.put(msg);
    return (await Promise.race([fromPy.get(), died])) as T;
  };
  return {
    proc,
    toPy,
    fromPy,
    ask,
    stderr: () => err,
    exited,
    async close() {
      if (proc.exitCode === null && proc.signalCode === null) {
        try {
          await ask({ op: 'exit' });
        } catch {
          proc.kill('SIGKILL');
        }
      }
      await exited;
      toPy.close();
      fromPy.close();
    },
  };
}
