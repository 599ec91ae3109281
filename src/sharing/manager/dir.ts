// Where the manager's socket lives: a directory only this user can enter (0700), so that
// no other user can even reach the socket; the manager checks each peer's uid as well.
import { lstatSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { PROTOCOL_VERSION } from './protocol.js';
import { envString, type EnvName } from '../../env.js';

/** `TENSORPROC_MANAGER_DIR` (tests use their own), else $XDG_RUNTIME_DIR/tensorproc, else /tmp/tensorproc-<uid>. */
export const DIR_ENV = 'TENSORPROC_MANAGER_DIR' satisfies EnvName;

export function managerDir(): string {
  const env = envString(DIR_ENV);
  if (env) return env;
  const xdg = process.env.XDG_RUNTIME_DIR;
  if (xdg) return join(xdg, 'tensorproc');
  return `/tmp/tensorproc-${process.getuid!()}`;
}

// Named by protocol version: tensorproc releases that speak different protocols run
// managers side by side instead of refusing each other's clients.
export const socketPath = (dir: string): string => join(dir, `manager-v${PROTOCOL_VERSION}.sock`);
export const lockPath = (dir: string): string => join(dir, `manager-v${PROTOCOL_VERSION}.lock`);
/** Where a manager logs under NODE_DEBUG=tensorproc when TENSORPROC_MANAGER_LOG names no file. */
export const managerLog = (dir: string): string => join(dir, 'manager.log');

/**
 * Creates the directory if needed and checks it is safe: a real directory (not a link),
 * owned by this user, closed to everyone else. Returns null when it is, else what is wrong.
 * (/tmp is shared: another user could have made /tmp/tensorproc-<uid> first.)
 */
export function checkDir(dir: string): string | null {
  try {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    const st = lstatSync(dir);
    if (!st.isDirectory()) return `${dir} is not a directory`;
    if (st.uid !== process.getuid!()) return `${dir} belongs to uid ${st.uid}, not to this user (${process.getuid!()})`;
    if ((st.mode & 0o077) !== 0) return `${dir} is open to other users (mode ${(st.mode & 0o777).toString(8)}, needs 700)`;
    return null;
  } catch (e) {
    return `${dir} cannot be created (${(e as Error).message})`;
  }
}
