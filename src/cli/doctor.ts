// `tensorproc doctor`: what this machine allows, in one report. A check fails when something
// cannot work at all (exit status 1), and warns when it works until a limit the machine sets
// is reached, saying how to raise it. The addon and everything that needs it are imported
// here, not statically, so that a missing or broken addon is a failed check in the report
// instead of a crash before it.
import { accessSync, constants, existsSync, lstatSync, readFileSync, statfsSync } from 'node:fs';
import { dirname } from 'node:path';
// Plain path logic, no addon: the manager's directory is checked whatever the addon does.
import { checkDir, managerDir } from '../sharing/manager/dir.js';
import { ENV, envNumber, isEnvName, PARENT_PID_ENV } from '../env.js';

export type Status = 'ok' | 'warn' | 'fail';

export interface Check {
  name: string;
  status: Status;
  detail: string;
}

/** A failed check's error: fail, or only warn. */
class Warning extends Error {}

function tryCall(name: string, fn: () => string): Check {
  try {
    return { name, status: 'ok', detail: fn() };
  } catch (e) {
    return { name, status: e instanceof Warning ? 'warn' : 'fail', detail: (e as Error).message };
  }
}

export function formatCheck(c: Check): string {
  return `${{ ok: 'ok  ', warn: 'WARN', fail: 'FAIL' }[c.status]}  ${c.name.padEnd(26)} ${c.detail}`;
}

const gib = (n: number) => `${(n / 2 ** 30).toFixed(1)} GiB`;
const mib = (n: number) => `${Math.round(n / 2 ** 20)} MiB`;

/**
 * Below this, /dev/shm is a container's (Docker gives 64 MiB): one W4 batch of 32 images is
 * 18 MiB, and a loader keeps prefetchFactor x numWorkers of them in flight.
 */
export const SHM_WARN_BYTES = 2 ** 30;
/**
 * Below this open-file limit, descriptors can run out: under file_descriptor each free segment a
 * process keeps for reuse holds one (up to 1,024, NOTE [Segment recycling]), beside the
 * received ones it keeps (TENSORPROC_KEEP_FDS), its queues' sockets and its children's pipes.
 */
export const NOFILE_WARN = 4096;

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
    checks.push({ name: 'addon', status: 'fail', detail: (e as Error).message });
    for (const name of ADDON_CHECKS) checks.push({ name, status: 'fail', detail: 'not checked: it needs the addon' });
    return [...checks, ...machineChecks()];
  }
  const { addon } = native;
  checks.push(
    { name: 'addon', status: 'ok', detail: `loaded (${native.addonPath})` },
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
  checks.push(...(await cudaChecks(addon)));
  return [...checks, ...machineChecks()];
}

/**
 * The CUDA driver, its devices and a round of what tensorproc does with them (allocate,
 * export, import, fill, copy back, pin a shared segment). No driver is not a failure: the
 * report says why CUDA is unavailable (mp.cuda.unavailableReason()).
 */
async function cudaChecks(addon: typeof import('../native/index.js').addon): Promise<Check[]> {
  const { cuda } = await import('../cuda/index.js');
  const st = cuda.status();
  const out: Check[] = [
    tryCall('cuda driver', () => (st.available ? `CUDA ${st.driverVersion} (${st.library})` : `unavailable: ${st.reason}`)),
  ];
  if (!st.available) return out;
  out.push(
    tryCall('cuda devices', () =>
      st.devices
        .map(
          (d) =>
            `cuda:${d.index} ${d.name}, ${gib(d.totalBytes)}, ${d.canShare ? `shares (granularity ${mib(d.granularity)})` : 'cannot share (no VMM / POSIX descriptors)'}`,
        )
        .join('; '),
    ),
    tryCall('cuda sharing', () => {
      const d = st.devices.find((x) => x.canShare);
      if (d === undefined) throw new Warning('no device can share memory between processes: CUDA tensors work, but cannot travel');
      const g = d.granularity;
      const [h, p] = addon.cudaChunkCreate(d.index, g);
      let fd = -1;
      let imported: [bigint, bigint] | null = null;
      try {
        fd = addon.cudaChunkExport(d.index, h);
        imported = addon.cudaChunkImport(d.index, fd, g);
        addon.cudaMemset(d.index, p, 4, 4, 0x3f800000, 0);
        const back = new ArrayBuffer(16);
        addon.cudaCopyDtoH(d.index, back, 0, imported[1], 16);
        if (new Float32Array(back)[3] !== 1) throw new Error('an imported allocation does not show the exporter’s write');
      } finally {
        if (imported !== null) addon.cudaChunkDrop(d.index, imported[0], imported[1], g);
        if (fd >= 0) addon.close(fd);
        addon.cudaChunkDrop(d.index, h, p, g);
      }
      const mfd = addon.memfdCreate('tensorproc-doctor', 1 << 20);
      const m = addon.map(mfd, 1 << 20);
      addon.close(mfd);
      try {
        addon.cudaPin(m);
      } finally {
        addon.unmap(m);
      }
      return `cuda:${d.index}: export, import, fill, copy back and pinning a shared segment work`;
    }),
  );
  return out;
}

/** What the machine gives, whatever the addon does. */
function machineChecks(): Check[] {
  return [
    tryCall('/dev/shm', () => {
      const s = statfsSync('/dev/shm');
      const free = s.bavail * s.bsize;
      const total = s.blocks * s.bsize;
      if (total < SHM_WARN_BYTES) {
        throw new Warning(
          `only ${mib(total)} (${mib(free)} free), a container's default: file_system tensors beyond that fail (ERR_TP_SHM_FULL). ` +
            'Docker: docker run --shm-size=8g (compose: shm_size: 8gb; Kubernetes: an emptyDir with medium: Memory at /dev/shm); ' +
            'or use file_descriptor (the default), whose segments are not in /dev/shm',
        );
      }
      return `${gib(total)}, ${gib(free)} free`;
    }),
    tryCall('memory', () => {
      const m = /^MemAvailable:\s+(\d+) kB$/m.exec(readFileSync('/proc/meminfo', 'latin1'));
      return m ? `${gib(Number(m[1]) * 1024)} available` : 'unknown';
    }),
    tryCall('open-file limit', () => {
      // Node raises its soft limit to the hard one as it starts, so the soft limit read here is
      // what every node process gets, and only the hard limit can hold it low.
      const m = /^Max open files\s+(\d+|unlimited)\s+(\d+|unlimited)/m.exec(readFileSync('/proc/self/limits', 'latin1'));
      if (!m) return 'unknown';
      const [soft, hard] = [m[1]!, m[2]!];
      if (soft !== 'unlimited' && Number(soft) < NOFILE_WARN) {
        throw new Warning(
          `${soft} (hard ${hard}): under file_descriptor every shared tensor kept or cached holds a descriptor, and ERR_TP_TOO_MANY_FILES comes at the limit. ` +
            'Raise the hard limit, which node raises its own to: ulimit -Hn 65536 as root, Docker --ulimit nofile=65536:65536, systemd LimitNOFILE=65536, or /etc/security/limits.conf',
        );
      }
      return `soft ${soft}, hard ${hard}`;
    }),
    tryCall('manager directory', () => checkManagerDir(managerDir())),
    tryCall('environment', checkEnvironment),
  ];
}

/**
 * Where the file_system manager's socket goes (TENSORPROC_MANAGER_DIR, else
 * $XDG_RUNTIME_DIR/tensorproc, else /tmp/tensorproc-<uid>), checked without creating it:
 * missing is fine while it can be made at first use; a directory that cannot be made, or
 * that another user could enter, keeps file_system from starting its manager.
 */
function checkManagerDir(dir: string): string {
  const fix = 'Point TENSORPROC_MANAGER_DIR at a directory of yours (mode 700), or unset an XDG_RUNTIME_DIR that does not exist';
  if (!existsSync(dir)) {
    let parent = dirname(dir);
    while (!existsSync(parent) && parent !== dirname(parent)) parent = dirname(parent);
    try {
      if (!lstatSync(parent).isDirectory()) throw new Error(`${parent} is not a directory`);
      accessSync(parent, constants.W_OK | constants.X_OK);
    } catch (e) {
      throw new Warning(
        `${dir} is missing and cannot be made (${(e as Error).message}): file_system cannot start its manager, so segments of killed processes stay in /dev/shm. ${fix}`,
      );
    }
    return `${dir} (missing: made at first use of file_system)`;
  }
  // It exists, so checkDir() makes nothing: it only says what is wrong with it.
  const problem = checkDir(dir);
  if (problem !== null) throw new Warning(`${problem}: file_system cannot start its manager. ${fix}`);
  return dir;
}

/**
 * The TENSORPROC_* variables set here (src/env.ts is their table). A name tensorproc does not
 * know, a typo most likely, is ignored: a warning naming it; so is a numeric one that is not a
 * number tensorproc takes (its default is used instead).
 */
function checkEnvironment(): string {
  const set = Object.keys(process.env)
    .filter((k) => k.startsWith('TENSORPROC_') && k !== PARENT_PID_ENV && process.env[k] !== '')
    .sort();
  const problems: string[] = [];
  for (const k of set) {
    if (!isEnvName(k)) problems.push(`${k} is not a tensorproc variable (ignored)`);
    else if (typeof ENV[k].default === 'number' && envNumber(k) === undefined)
      problems.push(`${k}=${process.env[k]} is not a number it takes (its default, ${ENV[k].default}, is used)`);
  }
  if (problems.length > 0)
    throw new Warning(`${problems.join('; ')}. The variables and their values: docs/tensors.md, "Environment variables"`);
  return set.length === 0 ? 'no TENSORPROC_* variable set: every default' : set.map((k) => `${k}=${process.env[k]}`).join(', ');
}
