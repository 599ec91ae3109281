// What the fault campaign's runner knows of processes, read from /proc (it loads nothing of
// tensorproc): a trial's descendants, whether one still runs, and what one is doing.
import { readdirSync, readFileSync } from 'node:fs';

function stat(pid: number): { ppid: number; state: string } | null {
  try {
    const s = readFileSync(`/proc/${pid}/stat`, 'latin1');
    const rest = s.slice(s.lastIndexOf(')') + 2).split(' ');
    return { state: rest[0]!, ppid: Number(rest[1]) };
  } catch {
    return null;
  }
}

/** Alive and not a zombie. */
export function running(pid: number): boolean {
  const s = stat(pid);
  return s !== null && s.state !== 'Z';
}

/** Every process below `root` now (not `root` itself). */
export function descendants(root: number): number[] {
  const children = new Map<number, number[]>();
  for (const n of readdirSync('/proc')) {
    const pid = Number(n);
    if (!Number.isInteger(pid)) continue;
    const s = stat(pid);
    if (s === null) continue;
    const list = children.get(s.ppid) ?? [];
    list.push(pid);
    children.set(s.ppid, list);
  }
  const out: number[] = [];
  const todo = [root];
  while (todo.length) for (const c of children.get(todo.pop()!) ?? []) out.push(c), todo.push(c);
  return out;
}

export function cmdline(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'latin1').split('\0').join(' ').trim();
  } catch {
    return '';
  }
}

/** The file_system manager outlives its users on purpose (it stops once idle): not a process left. */
export const isManager = (pid: number): boolean => /programs\/manager\.[jt]s/.test(cmdline(pid));

/** A process child of tensorproc: its bootstrap (src/programs/process-child.ts) or that bootstrap's bundle. */
export const isChild = (pid: number): boolean => /programs\/process-child(\.bundle)?\.[jt]s/.test(cmdline(pid));

/** One line on what `pid` is doing: its state and the kernel function it sleeps in. */
export function describeProcess(pid: number, role: string): string {
  const s = stat(pid);
  if (s === null) return `${role} ${pid}: gone`;
  let wchan = '';
  try {
    wchan = readFileSync(`/proc/${pid}/wchan`, 'latin1');
  } catch {
    // not readable here
  }
  return `${role} ${pid}: state ${s.state}${wchan && wchan !== '0' ? ` in ${wchan}` : ''}`;
}
