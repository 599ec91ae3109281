// Whether a process runs, read from /proc independently of the code under test.
import { readFileSync } from 'node:fs';

/** Alive and not a zombie (a zombie has exited; only its parent has not reaped it yet). */
export function running(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'latin1');
    return stat[stat.lastIndexOf(')') + 2] !== 'Z';
  } catch {
    return false;
  }
}
