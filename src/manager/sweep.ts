// Which files of /dev/shm are this user's segments, and whose (manager side): the registry
// (registry.ts) judges names, this file finds them. A name alone proves nothing: anyone can
// make a file called tensorproc_<pid>_…, and a manager running as root could open and remove
// every user's.
import { lstatSync, readdirSync } from 'node:fs';
import { creatorOf, NAME_PATTERN } from '../sharing/manager/protocol.js';
import { isAlive } from '../sharing/liveness.js';

const S_IFMT = 0o170000;
const S_IFREG = 0o100000;

/**
 * Whether /dev/shm/`entry` may be one of this user's segments: a regular file (not a link, a
 * FIFO, a device…) that `uid` owns. The registry checks the opened file again (isOwnFile)
 * before touching it: the name may be replaced in between.
 */
export function isMine(entry: string, uid: number): boolean {
  try {
    const st = lstatSync(`/dev/shm/${entry}`);
    return st.isFile() && st.uid === uid;
  } catch {
    return false; // gone
  }
}

/** Whether an opened file (fstat's mode and uid) is a regular file that `myUid` owns. */
export function isOwnFile(mode: number, uid: number, myUid: number): boolean {
  return (mode & S_IFMT) === S_IFREG && uid === myUid;
}

/** `known` and the names in /dev/shm that `pid` created (its pid is in them) and `uid` owns. */
export function createdBy(pid: number, uid: number, known: Iterable<string> = []): Set<string> {
  const names = new Set(known);
  try {
    const prefix = `tensorproc_${pid}_`;
    for (const entry of readdirSync('/dev/shm')) if (entry.startsWith(prefix) && isMine(entry, uid)) names.add(`/${entry}`);
  } catch {
    // no /dev/shm listing: the known names only
  }
  return names;
}

/**
 * At a manager's start: the names of this user whose creator is dead, left by processes that
 * died while no manager ran (`known`: names the registry follows already, skipped).
 */
export function deadCreatorNames(uid: number, known: (name: string) => boolean): string[] {
  let entries: string[];
  try {
    entries = readdirSync('/dev/shm');
  } catch {
    return [];
  }
  const out: string[] = [];
  for (const entry of entries) {
    const name = `/${entry}`;
    if (!NAME_PATTERN.test(name) || isAlive(creatorOf(name)) || known(name) || !isMine(entry, uid)) continue;
    out.push(name);
  }
  return out;
}
