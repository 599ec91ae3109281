// `tensorproc shm ls` / `shm clean`: the named (file_system) segments of this user in
// /dev/shm, and the removal of those whose users have all died. memfd segments
// (file_descriptor) never appear in /dev/shm and cannot be left behind.
import { readdirSync, statSync } from 'node:fs';
import { addon } from '../native/index.js';
import { SHM_PREFIX } from '../sharing/index.js';
import { holders, MAGIC, W_MAGIC, W_PID, W_REFS, HEADER_BYTES } from '../sharing/segment-header.js';
import { isAlive } from '../sharing/liveness.js';
import { creatorOf } from '../sharing/manager/protocol.js';

export interface SegmentInfo {
  name: string;
  bytes: number;
  creatorPid: number;
  /** Processes with a hold recorded in the header, and whether each is alive. */
  holders: { pid: number; count: number; alive: boolean }[];
  refs: number | null;
  /** No live creator and no live holder: nobody can still be using the name. */
  orphaned: boolean;
}

function readHeader(name: string, bytes: number): { refs: number; pid: number; holders: [number, number][] } | null {
  if (bytes < HEADER_BYTES) return null;
  let fd: number;
  try {
    fd = addon.shmOpen(`/${name}`);
  } catch {
    return null;
  }
  try {
    const m = addon.map(fd, HEADER_BYTES);
    const h = new Int32Array(addon.sharedBuffer(m, 0, HEADER_BYTES));
    addon.unmap(m);
    if (Atomics.load(h, W_MAGIC) !== MAGIC) return null;
    return { refs: Atomics.load(h, W_REFS), pid: Atomics.load(h, W_PID), holders: holders(h) };
  } finally {
    addon.close(fd);
  }
}

export function listSegments(): SegmentInfo[] {
  const uid = process.getuid?.() ?? -1;
  const out: SegmentInfo[] = [];
  for (const name of readdirSync('/dev/shm')) {
    if (!name.startsWith(SHM_PREFIX)) continue;
    let st;
    try {
      st = statSync(`/dev/shm/${name}`);
    } catch {
      continue; // removed meanwhile
    }
    if (st.uid !== uid) continue;
    const namePid = creatorOf(`/${name}`);
    const header = readHeader(name, st.size);
    const creatorPid = header?.pid ?? namePid;
    const hs = (header?.holders ?? []).map(([pid, count]) => ({ pid, count, alive: isAlive(pid) }));
    out.push({
      name,
      bytes: st.size,
      creatorPid,
      holders: hs,
      refs: header?.refs ?? null,
      orphaned: !isAlive(creatorPid) && hs.every((h) => !h.alive || h.count === 0),
    });
  }
  return out;
}

/** Removes the orphaned segments (or all of this user's with `all`); returns their names. */
export function cleanSegments(all = false): string[] {
  const removed: string[] = [];
  for (const s of listSegments()) {
    if (!all && !s.orphaned) continue;
    try {
      addon.shmUnlink(`/${s.name}`);
      removed.push(s.name);
    } catch {
      // removed meanwhile by its last user or the manager
    }
  }
  return removed;
}
