// The anchor programs (bench/anchors/) and the interpreters that run them: where they are in
// a checkout and in an installed package, which python3 has torch, and running one to
// collect the JSON lines it prints.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync, realpathSync } from 'node:fs';
import { createRequire } from 'node:module';
import { constants as osConstants } from 'node:os';
import { delimiter, dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { BenchNotInstalledError } from '../../src/cli/errors.js';

/** The package's root: dist/bench/lib/ is three levels below it, in a checkout as installed. */
const ROOT = fileURLToPath(new URL('../../../', import.meta.url));

/**
 * An anchor program by file name: compiled ones (`node-ipc.js`, from bench/anchors/*.ts) are
 * in dist/bench/anchors, the others (`torch-queue.py`) in bench/anchors; both ship in the
 * package (package.json `files`).
 */
export function anchorPath(name: string): string {
  for (const dir of [join(ROOT, 'dist/bench/anchors'), join(ROOT, 'bench/anchors')]) {
    const p = join(dir, name);
    if (existsSync(p)) return p;
  }
  throw new BenchNotInstalledError(
    `the anchor program ${name} is not in this installation (looked in ${ROOT}dist/bench/anchors and ${ROOT}bench/anchors)`,
  );
}

/** Every `python3` on PATH, in order, then Debian's, without duplicates. */
function pythonCandidates(): string[] {
  const found = [
    ...(process.env.PATH ?? '')
      .split(delimiter)
      .filter(Boolean)
      .map((d) => join(d, 'python3')),
    '/usr/bin/python3',
  ];
  const seen = new Set<string>();
  return found.filter((p) => {
    // /bin/python3 is /usr/bin/python3 where /bin is a link; a pyenv shim is a script of its own.
    if (!existsSync(p)) return false;
    const real = realpathSync(p);
    if (seen.has(real)) return false;
    seen.add(real);
    return true;
  });
}

/** The version a python prints for `code`, or null if it fails (no such module, say). */
function probe(python: string, code: string): string | null {
  // A pyenv shim that finds no such version exits non-zero at once; `import torch` takes a
  // second or two; a minute covers a cold disk.
  const r = spawnSync(python, ['-c', code], { encoding: 'utf8', timeout: 60_000, stdio: ['ignore', 'pipe', 'ignore'] });
  return r.status === 0 ? r.stdout.trim() : null;
}

export interface Python {
  path: string;
  /** torch.__version__, or null for a python without torch. */
  torch: string | null;
}

let cached: { torch: Python | null; any: Python | null } | undefined;

/**
 * The first python3 that imports torch (YARDSTICK.md: the first python3 on PATH may be a
 * pyenv one without it, while Debian's python3-torch is in /usr/bin/python3), and the first
 * that runs at all (for the anchors that need no torch). The runner finds them once and
 * hands them to its workloads in TENSORPROC_BENCH_PYTHON / TENSORPROC_BENCH_TORCH ('' for
 * none), so that each workload does not probe again.
 */
export function findPythons(): { torch: Python | null; any: Python | null } {
  if (cached) return cached;
  const given = process.env.TENSORPROC_BENCH_PYTHON;
  if (given !== undefined) {
    const torch = process.env.TENSORPROC_BENCH_TORCH ?? '';
    cached = { any: given ? { path: given, torch: torch || null } : null, torch: given && torch ? { path: given, torch } : null };
    return cached;
  }
  let any: Python | null = null;
  let torch: Python | null = null;
  for (const path of pythonCandidates()) {
    if (any === null && probe(path, 'import sys; print(sys.version.split()[0])') !== null) any = { path, torch: null };
    const version = probe(path, 'import torch; print(torch.__version__)');
    if (version !== null) {
      torch = { path, torch: version };
      break;
    }
  }
  cached = { torch, any: torch ?? any };
  return cached;
}

/** The environment that hands findPythons()'s answer to a workload program. */
export function pythonEnv(): Record<string, string> {
  const { torch, any } = findPythons();
  const py = torch ?? any;
  return { TENSORPROC_BENCH_PYTHON: py?.path ?? '', TENSORPROC_BENCH_TORCH: torch?.torch ?? '' };
}

// NOTE [Ending what the bench started]
// A program the bench runs may start processes of its own: a workload program its children,
// torch's anchors a producer and a consumer (start method spawn, each a python of its own),
// message-limit.py a forked writer. Ending the program alone leaves those running: a torch
// consumer blocked on a queue whose producer is gone stays for good, a producer measures on
// for minutes with nobody to read it. So every program runLines() starts leads a process
// group of its own (`detached`: setsid), and ending it ends that group, which is what it
// started and nothing else (SIGTERM, as to a program asked to stop). It is ended
//  - when this process exits before it: a reader that closed the pipe (NOTE [Closed pipe]),
//    a failure;
//  - when this process is asked to stop while it runs (SIGTERM: the runner ending its
//    workload program, which ends the anchors in turn; SIGINT and SIGHUP from a terminal,
//    whose Ctrl-C reaches only the runner's group now): its groups are ended, then it exits
//    with 128 + the signal's number through process.exit(), so that its own exit cleanup
//    (tensorproc's shared segments) runs too. The handlers are there only while a program runs.
// A bench process killed with SIGKILL leaves its programs to run to their end (known gap).

/** The programs runLines() has started that have not exited yet, each the leader of its own process group. */
const running = new Set<ChildProcess>();

/** Ends `child`'s process group: the program and whatever it started that is still in it. */
function endGroup(child: ChildProcess): void {
  if (child.pid === undefined) return;
  try {
    process.kill(-child.pid, 'SIGTERM');
  } catch {
    // the group is gone already
  }
}

process.on('exit', () => {
  for (const child of running) endGroup(child);
});

const STOP_SIGNALS = ['SIGTERM', 'SIGINT', 'SIGHUP'] as const;

function onStopSignal(signal: NodeJS.Signals): void {
  for (const child of running) endGroup(child);
  running.clear();
  process.exit(128 + (osConstants.signals[signal] ?? 0));
}

function track(child: ChildProcess): void {
  if (running.size === 0) for (const s of STOP_SIGNALS) process.on(s, onStopSignal);
  running.add(child);
  child.on('exit', () => {
    running.delete(child);
    if (running.size === 0) for (const s of STOP_SIGNALS) process.off(s, onStopSignal);
  });
}

/**
 * The version of piscina that the W3 anchor (anchors/piscina-pool.ts) would import, or null:
 * piscina is a devDependency, so an installed tensorproc has it only where the user installed
 * it. TENSORPROC_BENCH_PISCINA, as the runner hands it on ('' for none), is taken as it is.
 */
export function findPiscina(): string | null {
  const given = process.env.TENSORPROC_BENCH_PISCINA;
  if (given !== undefined) return given || null;
  let dir: string;
  try {
    dir = dirname(createRequire(anchorPath('piscina-pool.js')).resolve('piscina'));
  } catch {
    return null;
  }
  for (; dir !== dirname(dir); dir = dirname(dir)) {
    const pkg = join(dir, 'package.json');
    if (!existsSync(pkg)) continue;
    const { name, version } = JSON.parse(readFileSync(pkg, 'utf8')) as { name?: string; version?: string };
    if (name === 'piscina') return version ?? 'unknown';
  }
  return 'unknown';
}

/** The environment that hands findPiscina()'s answer to a workload program. */
export function piscinaEnv(): Record<string, string> {
  return { TENSORPROC_BENCH_PISCINA: findPiscina() ?? '' };
}

/**
 * Runs a program, handing each line it prints on stdout to `onLine`; rejects with the tail of
 * its stderr when it fails. Its stderr is kept, not shown: a library's warnings are not results.
 */
export function runLines(cmd: string, args: string[], env: NodeJS.ProcessEnv, onLine: (line: string) => void): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'], env, detached: true }); // NOTE [Ending what the bench started]
    track(child);
    let stderr = '';
    child.stderr!.setEncoding('utf8').on('data', (s: string) => {
      stderr = (stderr + s).slice(-16_384);
    });
    createInterface({ input: child.stdout! }).on('line', onLine);
    child.on('error', reject);
    child.on('close', (code, signal) => {
      if (code === 0) resolve();
      else reject(new Error(`${cmd} ${args.join(' ')} exited with ${signal ?? code}:\n${stderr.trim()}`));
    });
  });
}

/** Runs a program and resolves to the JSON objects it printed, one a line. */
export async function runJsonLines(cmd: string, args: string[], env: NodeJS.ProcessEnv = process.env): Promise<Record<string, unknown>[]> {
  const rows: Record<string, unknown>[] = [];
  await runLines(cmd, args, env, (l) => {
    if (!l.startsWith('{')) return;
    try {
      rows.push(JSON.parse(l) as Record<string, unknown>);
    } catch {
      // not a result line
    }
  });
  return rows;
}
