// `tensorproc doctor`: what this machine allows, in one report.
import { readFileSync, statfsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { addon } from '../native/index.js';
import { getSharingStrategy } from '../sharing/index.js';
import { listSegments } from './shm.js';

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

export function doctor(): Check[] {
  return [
    tryCall('node', () => `${process.version} on ${process.platform}-${process.arch}`),
    tryCall('addon', () => {
      const path = createRequire(import.meta.url).resolve('../../../build/Release/tensorproc.node');
      return `loaded (${path})`;
    }),
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
    tryCall('default strategy', () => getSharingStrategy()),
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
    tryCall('leftover segments', () => {
      const left = listSegments().filter((s) => s.orphaned);
      if (left.length) throw new Error(`${left.length} orphaned segment(s) in /dev/shm: run \`npx tensorproc shm clean\``);
      return 'none';
    }),
  ];
}
