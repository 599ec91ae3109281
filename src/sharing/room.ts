// Is there room for a new segment? Asked before creating one, because the kernel does not
// always answer cleanly: fallocate on a memfd (whose mount has no size limit) or on a
// /dev/shm as large as memory allocates page after page until the OOM killer ends the
// process, rather than failing with ENOSPC.
import { readFileSync, statfsSync } from 'node:fs';
import { ShmFullError } from '../errors.js';
import type { SharingStrategy } from './strategy.js';
import { cgroupRoom, memoryCgroups, type MemoryCgroup } from './cgroup.js';

// Below this size the check costs more than the risk it removes.
const CHECK_FROM = 2 ** 20;

// The memory cgroups that bind this process, found once (NOTE [Cgroup memory room]).
let cgroups: MemoryCgroup[] | null = null;

/** Memory this process can still charge: the machine's, or its cgroup's if that is less. */
function memAvailable(bytes: number): { room: number; cgroup: boolean } {
  let avail = Infinity;
  try {
    const m = /^MemAvailable:\s+(\d+) kB$/m.exec(readFileSync('/proc/meminfo', 'latin1'));
    if (m) avail = Number(m[1]) * 1024;
  } catch {
    // no /proc: rely on the kernel
  }
  const inCgroup = cgroupRoom((cgroups ??= memoryCgroups()), bytes);
  return inCgroup < avail ? { room: inCgroup, cgroup: true } : { room: avail, cgroup: false };
}

function shmAvailable(): number {
  try {
    const s = statfsSync('/dev/shm');
    return s.bavail * s.bsize;
  } catch {
    return Infinity;
  }
}

/** Throws ShmFullError when a segment of `bytes` cannot fit. */
export function checkRoom(strategy: SharingStrategy, bytes: number): void {
  if (bytes < CHECK_FROM) return;
  const { room: mem, cgroup } = memAvailable(bytes);
  const shm = strategy === 'file_system' ? shmAvailable() : Infinity;
  const room = Math.min(mem, shm);
  if (bytes > room) {
    const where = shm <= mem ? `/dev/shm has ${fmt(shm)} free` : `${fmt(mem)} of memory is available${cgroup ? ' under the memory limit of its cgroup' : ''}`;
    throw new ShmFullError(
      `Cannot allocate a shared segment of ${fmt(bytes)} (${strategy}): ${where}. ` +
        'Release tensors you no longer need, free /dev/shm (npx tensorproc shm ls / shm clean), or give the machine or container more memory (docker: --shm-size).',
      { code: 'ENOSPC', syscall: 'posix_fallocate', errno: -28 },
    );
  }
}

function fmt(n: number): string {
  if (!Number.isFinite(n)) return 'unlimited';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return `${n.toFixed(i === 0 ? 0 : 1)} ${units[i]}`;
}
