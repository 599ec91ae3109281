// The registry of named objects on disk (NOTE [Named objects] in src/transport/names/claim.ts):
// where it is, which entries are stale, and removing those. Here, on the storage floor,
// because both sides need it: the processes that make and attach names (src/transport/names)
// and the file_system manager, which sweeps the names of processes that died (src/manager).
//
// Layout: <manager dir>/names-v1/ (mode 0700, like the manager dir it is in, which is this
// user's alone: dir.ts), one listening SOCK_SEQPACKET socket per name, `<name>.sock`, bound
// by the process that made the object and answering attach requests there; and beside the
// folder, `names-v1.lock`, an flock taken around every replacement or removal of an entry
// that is not one's own.
// A socket file whose process died stays on disk (the kernel closes the socket, not the
// name), but connecting to it fails with ECONNREFUSED: that, and nothing else, makes an entry
// stale. Under the lock, "connect refused, then unlink" cannot remove an entry that a live
// process has just bound: only lock holders replace existing entries, and bind() itself never
// replaces one (EADDRINUSE).
import { closeSync, lstatSync, mkdirSync, openSync, readdirSync, unlinkSync } from 'node:fs';
import { join } from 'node:path';
import { addon } from '../../native/index.js';
import { checkDir, managerDir } from './dir.js';

/** The registry layout's version: a new layout gets a new folder, never a new meaning of this one. */
export const NAMES_VERSION = 1;
export const NAMES_FOLDER = `names-v${NAMES_VERSION}`;
/** What a name may be: a letter or digit first, then letters, digits, `_`, `-`, `.`; at most 64. */
export const NAME_SYNTAX = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/;
/** sun_path's size, terminating NUL included. */
const SUN_PATH = 108;

export function namesDir(dir: string = managerDir()): string {
  return join(dir, NAMES_FOLDER);
}

export function entryPath(names: string, name: string): string {
  return join(names, `${name}.sock`);
}

/** Whether a socket path fits in sun_path. */
export function fitsSocket(path: string): boolean {
  return Buffer.byteLength(path) < SUN_PATH;
}

/**
 * Creates the manager dir and the names folder if needed and checks both are this user's
 * alone (dir.ts's checkDir). Returns the folder, or what is wrong.
 */
export function openNamesDir(): { dir: string } | { problem: string } {
  const base = managerDir();
  const problem = checkDir(base);
  if (problem !== null) return { problem };
  const dir = namesDir(base);
  try {
    mkdirSync(dir, { mode: 0o700 });
  } catch (e) {
    if ((e as { code?: string }).code !== 'EEXIST') return { problem: `${dir} cannot be created (${(e as Error).message})` };
  }
  const inner = checkDir(dir);
  return inner === null ? { dir } : { problem: inner };
}

const sleeper = new Int32Array(new SharedArrayBuffer(4));

/**
 * Runs `fn` holding the folder's lock. Holders keep it for a few system calls, so a busy lock
 * is waited for in 1 ms steps (flock's blocking form is not among the addon's primitives); a
 * lock that stays busy for two seconds is not waited for any longer (`fn` runs anyway: the
 * lock only narrows a race between two replacements of one stale entry).
 */
export function withNamesLock<T>(dir: string, fn: () => T): T {
  let fd: number;
  try {
    fd = openSync(`${dir}.lock`, 'w', 0o600); // beside the folder, which then holds entries only
  } catch {
    return fn();
  }
  try {
    for (let i = 0; i < 2000 && !addon.tryLock(fd); i++) Atomics.wait(sleeper, 0, 0, 1);
    return fn();
  } finally {
    closeSync(fd); // drops the lock
  }
}

/** Whether a process listens on the socket at `path`: false when nobody does (ECONNREFUSED) or it is gone. */
export function isLive(path: string): boolean {
  let fd: number;
  try {
    fd = addon.unixConnect(path);
  } catch (e) {
    const code = (e as { code?: string }).code;
    // EAGAIN: its backlog is full, so someone listens; anything else but refused or gone: say live, touch nothing.
    return code !== 'ECONNREFUSED' && code !== 'ENOENT';
  }
  addon.close(fd); // the listener sees a connection that asks nothing and closes it
  return true;
}

/**
 * Removes the entry at `path` if it is stale (a socket of this user nobody listens on).
 * Call with the lock held. True when the path is free now.
 */
export function removeIfStale(path: string): boolean {
  const st = lstatSync(path, { throwIfNoEntry: false });
  if (st === undefined) return true;
  if (!st.isSocket() || st.uid !== process.getuid!()) return false;
  if (isLive(path)) return false;
  try {
    unlinkSync(path);
  } catch {
    // removed meanwhile
  }
  return true;
}

/**
 * The manager's sweep (and anyone's): removes every stale entry of the folder in `base` (a
 * manager dir). Returns the names removed.
 */
export function sweepNames(base: string): string[] {
  const dir = namesDir(base);
  let entries: string[];
  try {
    entries = readdirSync(dir).filter((e) => e.endsWith('.sock'));
  } catch {
    return [];
  }
  if (entries.length === 0) return [];
  const removed: string[] = [];
  withNamesLock(dir, () => {
    for (const e of entries) {
      const path = join(dir, e);
      if (lstatSync(path, { throwIfNoEntry: false }) !== undefined && removeIfStale(path)) removed.push(e.slice(0, -'.sock'.length));
    }
  });
  return removed;
}
