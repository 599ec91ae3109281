// The file_system half of the garbage trial (trial-garbage.ts): tensor frames whose segment
// name or byte count a hostile peer of the same uid chose. A file_system frame carries no
// descriptor, only a name for the receiver to open in /dev/shm, so the attack is the name:
// another user's file (root only), a FIFO, a directory or a link under a segment's name, a
// file of ours that is no segment, a name that does not exist, names outside
// /dev/shm/tensorproc_* ('../', no leading slash, a NUL), and a real segment's name with a
// byte count it cannot hold. Every one must be refused with a coded error; none of the files
// may be removed or changed; the real segment they name keeps its references.
import { chownSync, lstatSync, mkdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import * as mp from '../../src/index.js';
import { encodeMessage } from '../../src/transport/index.js';
import { W_REFS } from '../../src/sharing/segment-header.js';
import type { Prng } from './prng.js';

/** A file this trial made in /dev/shm, and what it must still be at the end. */
interface Planted {
  path: string;
  ino: number;
  uid: number;
}

export interface HostileNames {
  /** A tensor frame naming one of the hostile names, and how. */
  frame(r: Prng): { bytes: Uint8Array; how: string };
  /** What is wrong with the planted files now (removed, replaced, re-owned), or null. */
  check(): string | null;
  /** Removes the planted files and lets go of the real segment. */
  close(): void;
}

const OTHER_UID = 65534;

const refsOf = (b: Buffer): number => b.readInt32LE(4 * W_REFS);

export function hostileNames(): HostileNames {
  // A real segment of this process: its frame is the template, and some frames name it with a
  // byte count it cannot hold (a receiver that took one would miscount its references).
  const real = mp.full([256], 7, { dtype: 'int32', shared: true });
  const f = encodeMessage(real);
  const template = Uint8Array.from(f.bytes);
  f.abandon(); // never sent: the reference it added for its receiver is taken back
  const ndim = template[3]!;
  const nameAt = 24 + 16 * ndim;
  const realName = Buffer.from(template.subarray(nameAt, nameAt + template[5]!)).toString('latin1');
  const name = (): string => `/tensorproc_${process.pid}_${randomBytes(8).toString('hex')}`;
  const planted: Planted[] = [];
  const plant = (path: string): void => {
    const st = lstatSync(path);
    planted.push({ path, ino: st.ino, uid: st.uid });
  };
  const segmentBytes = readFileSync(`/dev/shm${realName}`); // a valid header, this process's pid in it
  const refsAtStart = refsOf(segmentBytes);
  const names: { name: string; what: string }[] = [];
  const add = (n: string, what: string): void => void names.push({ name: n, what });
  if (process.getuid!() === 0) {
    // Another user's file with a segment's very bytes: opened as root it would be mapped, its
    // references counted and, at its release, the file of uid 65534 removed.
    const n = name();
    writeFileSync(`/dev/shm${n}`, segmentBytes, { mode: 0o600 });
    chownSync(`/dev/shm${n}`, OTHER_UID, OTHER_UID);
    plant(`/dev/shm${n}`);
    add(n, `a file of uid ${OTHER_UID} holding a copy of a segment`);
  }
  const fifo = name();
  execFileSync('mkfifo', ['-m', '600', `/dev/shm${fifo}`]);
  plant(`/dev/shm${fifo}`);
  add(fifo, 'a FIFO');
  const dir = name();
  mkdirSync(`/dev/shm${dir}`, 0o700);
  plant(`/dev/shm${dir}`);
  add(dir, 'a directory');
  const link = name();
  symlinkSync(`/dev/shm${realName}`, `/dev/shm${link}`);
  plant(`/dev/shm${link}`);
  add(link, 'a symbolic link to a real segment');
  const headerless = name();
  writeFileSync(`/dev/shm${headerless}`, Buffer.alloc(segmentBytes.length), { mode: 0o600 });
  plant(`/dev/shm${headerless}`);
  add(headerless, 'a file of ours of a segment’s size without a header');
  add(name(), 'a name that does not exist');
  for (const n of [
    '/passwd',
    '/../etc/passwd',
    `/tensorproc_../../../dev/shm${realName}`,
    realName.slice(1),
    `/dev/shm${realName}`,
    `${realName}\0/../x`,
    `/${'x'.repeat(254)}`,
    `/tensorproc_${'.'.repeat(2)}`,
  ])
    add(n, `the name ${JSON.stringify(n).slice(0, 60)}`);
  const sizes = [-1, 1.5, NaN, Infinity, 2 ** 53, 1e300, 2 ** 40, segmentBytes.length];
  return {
    frame(r) {
      const byName = r.next() < 0.7;
      const target = byName ? r.pick(names) : { name: realName, what: 'a real segment' };
      const nbytes = byName ? r.pick([1024, 0]) : r.pick(sizes);
      const nb = Buffer.from(target.name, 'latin1');
      const bytes = new Uint8Array(nameAt + nb.length);
      bytes.set(template.subarray(0, nameAt));
      bytes[5] = nb.length;
      new DataView(bytes.buffer).setFloat64(8, nbytes, true);
      bytes.set(nb, nameAt);
      return { bytes, how: `a file_system tensor naming ${target.what} with nbytes ${nbytes}` };
    },
    check() {
      for (const p of planted) {
        let st;
        try {
          st = lstatSync(p.path);
        } catch {
          return `${p.path} was removed`;
        }
        if (st.ino !== p.ino || st.uid !== p.uid) return `${p.path} was replaced or changed hands`;
      }
      // No reference to the real segment was taken or dropped by the frames naming it.
      const now = refsOf(readFileSync(`/dev/shm${realName}`));
      if (now !== refsAtStart) return `the real segment's reference count went from ${refsAtStart} to ${now}`;
      return null;
    },
    close() {
      for (const p of planted) rmSync(p.path, { force: true, recursive: true });
      real.release();
    },
  };
}
