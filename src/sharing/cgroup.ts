// How much memory this process's memory cgroup still lets it charge, for the room check
// (room.ts).
//
// NOTE [Cgroup memory room]
// Shared memory (a memfd, a /dev/shm file) is charged to the cgroup of the process that
// touches it first, and a segment is fallocate()d whole when it is made: past the cgroup's
// limit the kernel does not fail that call, it OOM-kills the process. So the room check
// subtracts what the cgroup (and each of its ancestors, whose limits bind too) has charged
// from its limit, under either version:
//  - v2: memory.max and memory.current, in the unified hierarchy;
//  - v1: memory.limit_in_bytes and memory.usage_in_bytes, in the hierarchy that has the
//    memory controller (still what many CI runners, older Docker hosts and VMs use).
// Where the process's cgroup is found: /proc/self/cgroup names its path in each hierarchy,
// /proc/self/mountinfo where (and from which root, in a cgroup namespace or a container that
// sees only its own subtree) that hierarchy is mounted. The directories are found once per
// process; the numbers are read at each check. Page cache the kernel can drop before it
// OOM-kills (inactive_file in memory.stat) counts as room, read only when it decides.
import { readFileSync } from 'node:fs';

/** Where to read the process's cgroups from: the real files, or a fixture's (tests). */
export interface CgroupSources {
  readonly procCgroup: string;
  readonly mountinfo: string;
}

const SYSTEM: CgroupSources = { procCgroup: '/proc/self/cgroup', mountinfo: '/proc/self/mountinfo' };

/** A memory cgroup directory whose limit binds this process. */
export interface MemoryCgroup {
  readonly version: 1 | 2;
  readonly dir: string;
}

interface Mount {
  readonly root: string;
  readonly point: string;
  readonly version: 1 | 2;
}

// mountinfo escapes blanks and backslashes in paths as octal (\040).
const unoctal = (s: string): string => s.replace(/\\([0-7]{3})/g, (_, o: string) => String.fromCharCode(parseInt(o, 8)));

function memoryMounts(mountinfo: string): Mount[] {
  const out: Mount[] = [];
  for (const line of mountinfo.split('\n')) {
    const f = line.split(' ');
    const dash = f.indexOf('-');
    if (dash < 6) continue;
    const [fstype, , superOptions = ''] = f.slice(dash + 1);
    const version = fstype === 'cgroup2' ? 2 : fstype === 'cgroup' && superOptions.split(',').includes('memory') ? 1 : 0;
    if (version !== 0) out.push({ root: unoctal(f[3]!), point: unoctal(f[4]!), version });
  }
  return out;
}

/** The memory cgroups that bind this process, its own first, then its ancestors up to the mount. */
export function memoryCgroups(sources: CgroupSources = SYSTEM): MemoryCgroup[] {
  let cgroup: string;
  let mounts: Mount[];
  try {
    cgroup = readFileSync(sources.procCgroup, 'latin1');
    mounts = memoryMounts(readFileSync(sources.mountinfo, 'latin1'));
  } catch {
    return []; // no /proc: rely on the kernel
  }
  const out: MemoryCgroup[] = [];
  for (const line of cgroup.split('\n')) {
    const m = /^(\d+):([^:]*):(.*)$/.exec(line);
    if (m === null) continue;
    const version = m[1] === '0' && m[2] === '' ? 2 : m[2]!.split(',').includes('memory') ? 1 : 0;
    const mount = mounts.find((x) => x.version === version);
    if (version === 0 || mount === undefined) continue;
    // The path is relative to the hierarchy's root; the mount may show a subtree of it.
    const path = m[3]!;
    const rel = mount.root === '/' ? path : path === mount.root || path.startsWith(`${mount.root}/`) ? path.slice(mount.root.length) : '';
    const parts = rel.split('/').filter((p) => p !== '' && p !== '..');
    for (let n = parts.length; n >= 0; n--) out.push({ version, dir: [mount.point, ...parts.slice(0, n)].join('/') });
  }
  return out;
}

// v1 writes "no limit" as the largest page-aligned 63-bit number.
const NO_LIMIT = 2 ** 62;

function readNumber(path: string): number | null {
  try {
    const s = readFileSync(path, 'latin1').trim();
    if (s === 'max') return null;
    const n = Number(s);
    return Number.isFinite(n) && n < NO_LIMIT ? n : null;
  } catch {
    return null; // no such file: no limit here (a v2 root, a hierarchy without the controller)
  }
}

function inactiveFile(cg: MemoryCgroup): number {
  try {
    const stat = readFileSync(`${cg.dir}/memory.stat`, 'latin1');
    const m = (cg.version === 1 ? /^total_inactive_file (\d+)$/m : /^inactive_file (\d+)$/m).exec(stat);
    return m === null ? 0 : Number(m[1]);
  } catch {
    return 0;
  }
}

/**
 * Bytes the tightest of `cgroups` can still charge (Infinity with no limit), at least
 * `wanted` when that much can be had by dropping clean page cache.
 */
export function cgroupRoom(cgroups: readonly MemoryCgroup[], wanted = 0): number {
  let room = Infinity;
  for (const cg of cgroups) {
    const limit = readNumber(`${cg.dir}/${cg.version === 1 ? 'memory.limit_in_bytes' : 'memory.max'}`);
    if (limit === null) continue;
    const used = readNumber(`${cg.dir}/${cg.version === 1 ? 'memory.usage_in_bytes' : 'memory.current'}`) ?? 0;
    let here = limit - used;
    if (here < wanted) here += inactiveFile(cg);
    room = Math.min(room, Math.max(0, here));
  }
  return room;
}
