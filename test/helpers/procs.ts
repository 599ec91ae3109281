// Whether a process runs, read from /proc independently of the code under test.
import { readFileSync } from 'node:fs';
import type { ProcessContext } from '../../src/index.js';

/** Alive and not a zombie (a zombie has exited; only its parent has not reaped it yet). */
export function running(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'latin1');
    return stat[stat.lastIndexOf(')') + 2] !== 'Z';
  } catch {
    return false;
  }
}

/** Leaves nothing of `ctx` running, whatever happened in the test: SIGKILL, then each exit awaited. */
export async function reap(ctx: ProcessContext | undefined): Promise<void> {
  if (!ctx) return;
  for (const p of ctx.processes) if (p.isAlive()) p.kill('SIGKILL');
  await Promise.all(ctx.processes.map((p) => p.exited));
}
