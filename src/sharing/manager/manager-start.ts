// Reaching a file_system manager, starting one when none answers: the part of the client
// (client.ts) that knows about processes and sockets, not about what this process maps.
// See NOTE [The file_system manager] in manager/server.ts.
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, extname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { addon } from '../../native/index.js';
import { checkDir, managerLog, socketPath } from './dir.js';
import { debug } from '../../debug.js';
import { envString } from '../../env.js';

/** How long a start may take before we give up and warn. */
export const START_TIMEOUT_MS = 5000;
/** A manager that exits at once (it lost the start race to one that was shutting down) is started again, this often at most. */
const MAX_SPAWNS = 5;

/** A manager started ahead of the first segment (prestart), with whether it has gone since. */
export interface Prestarted {
  child: ChildProcess;
  dir: string;
  at: number;
  gone: boolean;
}

/**
 * Starts a manager for `dir` in the background when none has a socket there and the
 * directory is usable; null when it did not start one (the first segment then tries, and
 * warns if it must).
 */
export function prestartServer(dir: string): Prestarted | null {
  if (checkDir(dir) !== null || existsSync(socketPath(dir))) return null;
  try {
    const started: Prestarted = { child: startServer(dir), dir, at: Date.now(), gone: false };
    const gone = (): void => {
      started.gone = true;
    };
    started.child.once('exit', gone);
    started.child.once('error', gone);
    return started;
  } catch {
    return null;
  }
}

/**
 * Connects to the manager of `dir`, starting one if nobody listens, within START_TIMEOUT_MS:
 * the connected descriptor, or why not (a sentence for ManagerUnavailableError). `pre` is a
 * manager prestartServer() began a moment ago, which counts as ours; `pause` waits between
 * attempts (the client keeps its timer, to let it hold the event loop or not).
 */
export async function connectOrStart(
  dir: string,
  pre: Prestarted | null,
  pause: (ms: number) => Promise<void>,
): Promise<number | { problem: string }> {
  const problem = checkDir(dir);
  if (problem !== null) return { problem: `${problem}. Point TENSORPROC_MANAGER_DIR at a directory of yours with mode 700` };
  const path = socketPath(dir);
  const deadline = Date.now() + START_TIMEOUT_MS;
  const fresh = pre !== null && pre.dir === dir && Date.now() - pre.at < START_TIMEOUT_MS;
  let server: ChildProcess | null = fresh ? pre.child : null;
  let serverGone = fresh ? pre.gone : false;
  if (fresh && !serverGone) {
    pre.child.once('exit', () => (serverGone = true));
    pre.child.once('error', () => (serverGone = true));
  }
  let spawns = 0;
  let delay = 1;
  for (;;) {
    try {
      return addon.unixConnect(path);
    } catch (e) {
      const code = (e as { code?: string }).code;
      if (code !== 'ENOENT' && code !== 'ECONNREFUSED' && code !== 'EAGAIN')
        return { problem: `connecting to ${path} failed with ${code}` };
      // Nobody listens (no socket, or a dead manager's): start one. If two processes do
      // this at once, the lock in server.ts lets one win; the other exits and we retry.
      if (code !== 'EAGAIN' && (server === null || serverGone) && spawns < MAX_SPAWNS) {
        spawns++;
        serverGone = false;
        server = startServer(dir);
        server.once('exit', () => (serverGone = true));
        server.once('error', () => (serverGone = true));
      }
    }
    if (Date.now() > deadline) return { problem: `no manager answered on ${path} within ${START_TIMEOUT_MS / 1000} s` };
    await pause(delay);
    delay = Math.min(delay * 2, 50);
  }
}

// Node options a manager started from a TypeScript source needs: the loader, nothing else.
function loaderArgs(): string[] {
  const out: string[] = [];
  const argv = process.execArgv;
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (/^(--import|--loader|--experimental-loader|--require|-r)$/.test(a) && i + 1 < argv.length) out.push(a, argv[++i]!);
    else if (/^--(import|loader|experimental-loader|require)=/.test(a)) out.push(a);
  }
  return out;
}

/** Starts a manager for `dir` in the background, in its own session: it outlives us. */
function startServer(dir: string): ChildProcess {
  const here = fileURLToPath(import.meta.url);
  const ext = extname(here);
  const compiled = ext === '.js';
  const child = spawn(process.execPath, [...(compiled ? [] : loaderArgs()), join(dirname(here), `../../programs/manager${ext}`), dir], {
    detached: true,
    stdio: 'ignore',
    // A compiled manager pins no directory; one under a loader resolves it from here.
    cwd: compiled ? '/' : process.cwd(),
  });
  child.unref();
  debug('manager started: pid %d for %s, its sweeps logged to %s', child.pid, dir, envString('TENSORPROC_MANAGER_LOG') ?? managerLog(dir));
  return child;
}
