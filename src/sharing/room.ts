// Is there room for a new segment? Asked before creating one, because the kernel does not
// always answer cleanly: fallocate on a memfd (whose mount has no size limit) or on a
// /dev/shm as large as memory allocates page after page until the OOM killer ends the
// process, rather than failing with ENOSPC.
//
// NOTE [Room budget]
// Reading the room costs 0.2-0.5 ms on this project's VMs (/proc/meminfo, then a limit and a
// usage file for each memory cgroup that binds the process: seven reads on a cgroup v1 host),
// as much as making the 1 MiB segment it guards: a pool worker making a fresh 1 MiB result
// per task paid it on every one. So a reading serves the checks after it while it is young
// (READING_MS) and this thread's own segments made since leave at least half of the room it
// found, and MARGIN_MIN, free after the one asked for; any other check reads again. A segment
// that might not fit, counting this thread's own allocations, is therefore always checked
// against a fresh reading, and what other processes and threads take is seen within
// READING_MS (or, at any age, once this thread has made half of what was free). Memory given
// back since is not counted, so the budget errs towards reading. The check was never exact
// for memory others take (it is made before fallocate, with no reservation); the budget widens
// that window from one system call to READING_MS.
import { readFileSync, statfsSync } from 'node:fs';
import { ShmFullError } from '../errors.js';
import type { SharingStrategy } from './strategy.js';
import { cgroupRoom, memoryCgroups, type MemoryCgroup } from './cgroup.js';

// Below this size the check costs more than the risk it removes.
const CHECK_FROM = 2 ** 20;
/** How long a reading serves (NOTE [Room budget]). */
export const READING_MS = 50;
/** The least room a check without reading leaves (NOTE [Room budget]). */
const MARGIN_MIN = 64 * 2 ** 20;

// The memory cgroups that bind this process, found once (NOTE [Cgroup memory room]).
let cgroups: MemoryCgroup[] | null = null;

interface Reading {
  readonly at: number;
  /** Memory this process could still charge, and whether its cgroup's limit was the tighter. */
  readonly mem: number;
  readonly cgroup: boolean;
  /** Free bytes of /dev/shm; null when not read (a file_descriptor check). */
  readonly shm: number | null;
  /** Bytes this thread has checked for since, all of them made or about to be. */
  made: number;
}

let last: Reading | null = null;
/** Readings taken (tests: NOTE [Room budget]). */
let readings = 0;

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
  const fs = strategy === 'file_system';
  const r = last;
  if (r !== null && (!fs || r.shm !== null) && performance.now() - r.at < READING_MS) {
    const room = fs ? Math.min(r.mem, r.shm!) : r.mem;
    if (room - r.made - bytes >= Math.max(MARGIN_MIN, room / 2)) {
      r.made += bytes;
      return;
    }
  }
  readings++;
  const { room: mem, cgroup } = memAvailable(bytes);
  const shm = fs ? shmAvailable() : null;
  last = { at: performance.now(), mem, cgroup, shm, made: 0 };
  const room = Math.min(mem, shm ?? Infinity);
  if (bytes > room) {
    const where =
      shm !== null && shm <= mem
        ? `/dev/shm has ${fmt(shm)} free`
        : `${fmt(mem)} of memory is available${cgroup ? ' under the memory limit of its cgroup' : ''}`;
    throw new ShmFullError(
      `Cannot allocate a shared segment of ${fmt(bytes)} (${strategy}): ${where}. ` +
        'Release tensors you no longer need, free /dev/shm (npx tensorproc shm ls / shm clean), or give the machine or container more memory (docker: --shm-size).',
      { code: 'ENOSPC', syscall: 'posix_fallocate', errno: -28 },
    );
  }
  last.made = bytes;
}

/** How many times this thread has read the room (tests: NOTE [Room budget]). */
export function roomReadings(): number {
  return readings;
}

function fmt(n: number): string {
  if (!Number.isFinite(n)) return 'unlimited';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) {
    n /= 1024;
    i++;
  }
  return `${n.toFixed(i === 0 ? 0 : 1)} ${units[i]}`;
}
