// Whether a process still lives, as the manager and `tensorproc shm` judge holders.
import { readFileSync } from 'node:fs';

/** Is `pid` a running process? A zombie is not: it holds nothing any more. */
export function isAlive(pid: number): boolean {
  if (!(pid > 0)) return false;
  try {
    process.kill(pid, 0); // needs no descriptor, unlike /proc
  } catch (e) {
    if ((e as { code?: string }).code === 'ESRCH') return false;
  }
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'latin1');
    const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
    return state !== 'Z' && state !== 'X' && state !== 'x';
  } catch (e) {
    // Gone since, or no descriptor left to look (EMFILE): it existed a moment ago.
    return (e as { code?: string }).code !== 'ENOENT' && (e as { code?: string }).code !== 'ESRCH';
  }
}
