// `tensorproc doctor`: what this machine allows, in one report. The addon and everything
// that needs it are imported here, not statically, so that a missing or broken addon is a
// failed check in the report instead of a crash before it.
import { readFileSync, statfsSync } from 'node:fs';

export interface Check {
  name: string;
  ok: boolean;
  detail: string;
}

function tryCall(name: string, fn: () => string): Check {
  try {
    return { name, ok: true, detail: fn() };
  } catch (e) {
    return { name, ok: false, detail: (e as Error).message };
  }
}

const gib = (n: number) => `${(n / 2 ** 30).toFixed(1)} GiB`;

/** The checks that need the addon, in report order (the names used below). */
const ADDON_CHECKS = ['file_descriptor strategy', 'file_system strategy', 'default strategy', 'leftover segments'] as const;

export async function doctor(): Promise<Check[]> {
  const checks: Check[] = [tryCall('node', () => `${process.version} on ${process.platform}-${process.arch}`)];
  let native: typeof import('../native/index.js');
  let sharing: typeof import('../sharing/index.js');
  let shm: typeof import('./shm.js');
  try {
    native = await import('../native/index.js');
    sharing = await import('../sharing/index.js');
    shm = await import('./shm.js');
  } catch (e) {
    checks.push({ name: 'addon', ok: false, detail: (e as Error).message });
    for (const name of ADDON_CHECKS) checks.push({ name, ok: false, detail: 'not checked: it needs the addon' });
    return [...checks, ...machineChecks()];
  }
  const { addon } = native;
  checks.push(
    { name: 'addon', ok: true, detail: `loaded (${native.addonPath})` },
    tryCall('file_descriptor strategy', () => {
      const fd = addon.memfdCreate('tensorproc-doctor', 4096);
      addon.close(fd);
      return 'memfd_create with seals works';
    }),
    tryCall('file_system strategy', () => {
      const name = `/tensorproc_${process.pid}_doctor`;
      const fd = addon.shmCreate(name, 4096);
      addon.close(fd);
      addon.shmUnlink(name);
      return 'shm_open in /dev/shm works';
    }),
    tryCall('default strategy', () => sharing.getSharingStrategy()),
    tryCall('leftover segments', () => {
      const left = shm.listSegments().filter((s) => s.orphaned);
      if (left.length) throw new Error(`${left.length} orphaned segment(s) in /dev/shm: run \`npx tensorproc shm clean\``);
      return 'none';
    }),
  );
  return [...checks, ...machineChecks()];
}

/** What the machine gives, whatever the addon does. */
function machineChecks(): Check[] {
  return [
    tryCall('/dev/shm', () => {
      const s = statfsSync('/dev/shm');
      const free = s.bavail * s.bsize;
      const total = s.blocks * s.bsize;
      if (total < 2 ** 30) throw new Error(`only ${gib(total)} (${gib(free)} free): file_system tensors larger than that fail. Docker: --shm-size=8g`);
      return `${gib(total)}, ${gib(free)} free`;
    }),
    tryCall('memory', () => {
      const m = /^MemAvailable:\s+(\d+) kB$/m.exec(readFileSync('/proc/meminfo', 'latin1'));
      return m ? `${gib(Number(m[1]) * 1024)} available` : 'unknown';
    }),
    tryCall('open-file limit', () => {
      const m = /^Max open files\s+(\d+|unlimited)\s+(\d+|unlimited)/m.exec(readFileSync('/proc/self/limits', 'latin1'));
      if (!m) return 'unknown';
      if (m[1] !== 'unlimited' && Number(m[1]) < 1024) {
        throw new Error(`soft limit ${m[1]} (hard ${m[2]}): raise it with ulimit -n`);
      }
      return `soft ${m[1]}, hard ${m[2]}`;
    }),
  ];
}
