// The fault campaign (NOTE [Fault trials] in plan.ts): `npm run faults -- --trials N`. Runs
// trials one after another, each a process of its own (trial.ts), under a deadline; checks
// after each that no process of it is left and that nothing it made is left in /dev/shm after
// the manager's graces; prints a table of trials and failures by kind, and the seed of every
// failing trial (`--replay KIND:SEED` runs it again). It touches /dev/shm machine-wide: run it
// under tp-run. It loads nothing of tensorproc itself.
import { spawn, spawnSync } from 'node:child_process';
import { appendFileSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { Command } from 'commander';
import { markdownTable, median } from '../../bench/lib/stats.js';
import { KINDS, describe, planTrial, type Kind } from './plan.js';
import { Prng } from './prng.js';
import { descendants, describeProcess, isChild, isManager, running } from './procs.js';

const TRIAL = fileURLToPath(new URL('./trial.js', import.meta.url));
/** What the manager promises: every name of a killed pipeline gone within 2 s of the kill. */
const CLEANUP_PROMISE_MS = 2000;

interface Outcome {
  kind: Kind;
  seed: number;
  what: string;
  ms: number;
  failures: { kind: string; detail: string }[];
  stats: Record<string, unknown>;
}

const shmNames = (): string[] => readdirSync('/dev/shm').filter((n) => n.startsWith('tensorproc_'));

// Every manager a trial starts logs its sweeps and removals (with why) here, so that a name
// left or removed late comes with what the manager made of the deaths (a user's own
// TENSORPROC_MANAGER_LOG wins).
const managerLog = process.env.TENSORPROC_MANAGER_LOG ?? join(mkdtempSync('/tmp/tensorproc-faults-log-'), 'manager.log');

/** The manager's log lines about `pids` or their names, the last `n` of them. */
function managerSays(pids: number[], n = 12): string {
  let lines: string[];
  try {
    lines = readFileSync(managerLog, 'latin1').split('\n');
  } catch {
    return '(no manager log)';
  }
  const about = lines.filter((l) => pids.some((pid) => l.includes(`pid ${pid} `) || l.includes(`tensorproc_${pid}_`)));
  return about.length ? about.slice(-n).join(' | ') : '(the manager logged nothing about them)';
}

async function until(cond: () => boolean, ms: number): Promise<number | null> {
  const t0 = performance.now();
  while (!cond()) {
    if (performance.now() - t0 > ms) return null;
    await new Promise((r) => setTimeout(r, 5));
  }
  return performance.now() - t0;
}

/** Runs one trial and checks what it leaves behind. */
async function runTrial(kind: Kind, seed: number): Promise<Outcome> {
  const p = planTrial(kind, seed);
  const out: Outcome = { kind, seed, what: describe(p), ms: 0, failures: [], stats: {} };
  const fail = (k: string, detail: string): void => void out.failures.push({ kind: k, detail });
  const before = new Set(shmNames());
  let cmd = [process.execPath, '--expose-gc', TRIAL, kind, String(seed)];
  const env: NodeJS.ProcessEnv = { ...process.env, TENSORPROC_MANAGER_LOG: managerLog };
  let privateDir: string | null = null;
  if (kind === 'shm-full') {
    // A small tmpfs of its own over /dev/shm, and a manager of its own that sees it.
    privateDir = mkdtempSync('/tmp/tensorproc-faults-');
    env.TENSORPROC_MANAGER_DIR = privateDir;
    cmd = ['unshare', '-m', 'sh', '-c', 'mount -t tmpfs -o size=24m tmpfs /dev/shm && exec "$@"', 'sh', ...cmd];
  }
  const t0 = performance.now();
  const child = spawn(cmd[0]!, cmd.slice(1), { stdio: ['ignore', 'pipe', 'pipe'], env });
  const parent = child.pid!;
  const roles = new Map<number, string>([[parent, 'parent']]);
  const seen = new Set<number>();
  const note = (): void => {
    for (const pid of descendants(parent)) {
      seen.add(pid);
      if (!roles.has(pid)) roles.set(pid, isManager(pid) ? 'manager' : isChild(pid) ? 'child' : 'process');
    }
  };
  let stderr = '';
  child.stderr!.on('data', (b: Buffer) => void (stderr = (stderr + b.toString()).slice(-4000)));
  let lastPhase = 'starting';
  let result = null as { failures: Outcome['failures']; stats: Record<string, unknown> } | null;
  let killedAt: number | null = null;
  let hung = false;
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((r) =>
    child.on('exit', (code, signal) => r({ code, signal })),
  );
  const deadline = setTimeout(() => {
    hung = true;
    note();
    const alive = [parent, ...seen].filter(running).map((pid) => describeProcess(pid, roles.get(pid) ?? 'process'));
    fail('hang', `no end within ${p.deadlineS} s; last phase "${lastPhase}"; running: ${alive.join('; ')}`);
    for (const pid of [parent, ...seen]) if (running(pid) && !isManager(pid)) process.kill(pid, 'SIGKILL');
  }, p.deadlineS * 1000);
  for await (const line of createInterface({ input: child.stdout! })) {
    let m: { phase?: string; pids?: Record<string, number[]>; result?: typeof result };
    try {
      m = JSON.parse(line);
    } catch {
      continue; // a library's stray line
    }
    if (m.pids) for (const [role, pids] of Object.entries(m.pids)) for (const pid of pids) roles.set(pid, role), seen.add(pid);
    if (m.phase) {
      lastPhase = m.phase;
      note();
      if (m.phase === 'kill me') {
        setTimeout(() => {
          note(); // the children as they are at the kill: each must die with the parent
          killedAt = performance.now();
          process.kill(parent, 'SIGKILL');
        }, p.delayMs);
      }
    }
    if (m.result) result = m.result;
  }
  const { code, signal } = await exited;
  clearTimeout(deadline);
  out.ms = performance.now() - t0;
  if (!hung) {
    if (kind === 'kill-parent') {
      if (signal !== 'SIGKILL')
        fail(
          'crash',
          `the parent ended with ${signal ?? `code ${code}`} before it was killed (phase "${lastPhase}"): ${stderr.slice(-1500)}`,
        );
    } else if (result === null)
      fail('crash', `the parent ended with ${signal ?? `code ${code}`} and no result (phase "${lastPhase}"): ${stderr.slice(-1500)}`);
    else {
      out.failures.push(...result.failures);
      out.stats = result.stats;
    }
  }
  const others = [...seen].filter((pid) => !isManager(pid) && roles.get(pid) !== 'manager');
  const gone = await until(() => !others.some(running), 5000);
  if (gone === null) {
    const left = others.filter(running);
    fail('process-left', left.map((pid) => describeProcess(pid, roles.get(pid) ?? 'process')).join('; '));
    for (const pid of left) process.kill(pid, 'SIGKILL');
  } else if (killedAt !== null) out.stats.childrenGoneMs = Math.round(performance.now() - killedAt);
  // Names this trial made: gone once the graces are over.
  // Only names of this trial's processes (a name holds its creator's pid): another user's
  // process outside the lock is not this trial's leak.
  const ours = new Set([parent, ...seen].map(String));
  const left = (): string[] => shmNames().filter((n) => !before.has(n) && ours.has(n.split('_')[1]!));
  const whose = (names: string[]): string =>
    [...new Set(names.map((n) => Number(n.split('_')[1])))]
      .map((pid) => `${roles.get(pid) ?? 'process'} ${pid} ${running(pid) ? 'running' : 'gone'}`)
      .join(', ');
  if (killedAt !== null && p.strategy === 'file_system') {
    const ms = await until(() => left().length === 0, 5000);
    const since = performance.now() - killedAt;
    out.stats.cleanupMs = Math.round(ms === null ? since : since);
    const trialPids = [parent, ...seen];
    if (ms === null)
      fail(
        'shm-left',
        `${left().length} names of ${whose(left())} 5 s after the parent's kill: ${left().slice(0, 4).join(' ')}; the manager: ${managerSays(trialPids)}`,
      );
    else if (since > CLEANUP_PROMISE_MS)
      fail(
        'slow-cleanup',
        `the last names went ${Math.round(since)} ms after the parent's kill (promise: ${CLEANUP_PROMISE_MS} ms); the manager: ${managerSays(trialPids)}`,
      );
  } else if ((await until(() => left().length === 0, CLEANUP_PROMISE_MS + 500)) === null) {
    fail(
      'shm-left',
      `${left().length} names of ${whose(left())} ${CLEANUP_PROMISE_MS + 500} ms after the trial: ${left().slice(0, 4).join(' ')}; the manager: ${managerSays([parent, ...seen])}`,
    );
    for (const n of left()) rmSync(`/dev/shm/${n}`, { force: true }); // so that the next trial starts clean
  }
  if (privateDir !== null) rmSync(privateDir, { recursive: true, force: true });
  return out;
}

function summary(outcomes: Outcome[]): string {
  const kinds = [...new Set(outcomes.map((o) => o.kind))];
  const failureKinds = [...new Set(outcomes.flatMap((o) => o.failures.map((f) => f.kind)))].sort();
  const rows = kinds.map((k) => {
    const os = outcomes.filter((o) => o.kind === k);
    return [
      k,
      os.length,
      os.filter((o) => o.failures.length === 0).length,
      ...failureKinds.map((f) => os.filter((o) => o.failures.some((x) => x.kind === f)).length),
      `${(median(os.map((o) => o.ms)) / 1000).toFixed(1)} s`,
    ];
  });
  const total = [
    'all',
    outcomes.length,
    outcomes.filter((o) => o.failures.length === 0).length,
    ...failureKinds.map((f) => outcomes.filter((o) => o.failures.some((x) => x.kind === f)).length),
    `${(outcomes.reduce((s, o) => s + o.ms, 0) / 1000).toFixed(0)} s in all`,
  ];
  const lines = [markdownTable(['kind', 'trials', 'passed', ...failureKinds, 'median time'], [...rows, total])];
  // What the strategies, sizes and channels were, over every trial.
  const by = (f: (o: Outcome) => string): string =>
    [...outcomes.reduce((m, o) => m.set(f(o), (m.get(f(o)) ?? 0) + 1), new Map<string, number>())].map(([k, n]) => `${k} ${n}`).join(', ');
  lines.push(
    '',
    `strategies: ${by((o) => o.what.split(' ')[0]!)}; sizes: ${by((o) => o.what.split(' ')[1]!)}; channels: ${by((o) => o.what.split(' ')[2]!.replace(/\(.*/, ''))}`,
  );
  const cleanups = outcomes.filter((o) => typeof o.stats.cleanupMs === 'number').map((o) => o.stats.cleanupMs as number);
  if (cleanups.length)
    lines.push(
      `kill-parent under file_system: names gone after the kill in median ${median(cleanups)} ms, at most ${Math.max(...cleanups)} ms (promise ${CLEANUP_PROMISE_MS} ms)`,
    );
  const backs = outcomes.filter((o) => typeof o.stats.backMs === 'number').map((o) => o.stats.backMs as number);
  if (backs.length)
    lines.push(`holders-40: back within 1% in median ${median(backs)} ms after the 40th kill, at most ${Math.max(...backs)} ms`);
  const failed = outcomes.filter((o) => o.failures.length);
  if (failed.length) {
    lines.push('', 'Failing trials (replay: npm run faults -- --replay KIND:SEED):');
    for (const o of failed)
      for (const f of o.failures)
        lines.push(`- ${o.kind}:${o.seed} (${o.what}): ${f.kind}: ${f.detail.replace(/\s+/g, ' ').slice(0, 1500)}`);
  }
  return lines.join('\n');
}

/** The kinds of a campaign and how often each comes: the kills most, the long ones least. */
const WEIGHTS: Record<Kind, number> = {
  'kill-producer': 4,
  'kill-consumer': 4,
  'kill-parent': 4,
  'exactly-once': 1,
  'holders-40': 0.5,
  'low-fd': 1,
  'shm-full': 1,
  garbage: 2,
  'bad-input': 1,
  'other-uid': 1,
  'low-fd-consumer': 1,
  'kill-receivers': 2,
};

async function main(): Promise<void> {
  const cli = new Command('faults')
    .description('the fault campaign: SIGKILLs, limits and exactly-once under real processes (NOTE [Fault trials])')
    .option('--trials <n>', 'how many trials', (v) => Number(v), 50)
    .option('--seed <n>', 'the campaign seed (each trial gets one from it); default: from the clock', (v) => Number(v))
    .option('--kinds <list>', `kinds to run, comma-separated (${KINDS.join(', ')})`)
    .option('--minutes <m>', 'start no trial after this many minutes', (v) => Number(v))
    .option('--replay <kind:seed...>', 'run these trials only')
    .option('--log <file>', 'append every outcome to this file as a JSON line');
  cli.parse();
  const o = cli.opts<{ trials: number; seed?: number; kinds?: string; minutes?: number; replay?: string[]; log?: string }>();
  const canUnshare = spawnSync('unshare', ['-m', 'true']).status === 0;
  let kinds = (o.kinds ? o.kinds.split(',').map((s) => s.trim()) : [...KINDS]) as Kind[];
  for (const k of kinds) if (!KINDS.includes(k)) cli.error(`unknown kind ${k}: one of ${KINDS.join(', ')}`);
  if (!canUnshare && kinds.includes('shm-full')) {
    console.error('shm-full left out: a private tmpfs needs unshare -m (root)');
    kinds = kinds.filter((k) => k !== 'shm-full');
  }
  let plan: [Kind, number][];
  if (o.replay) {
    plan = o.replay.map((s) => {
      const [k, seed] = s.split(':');
      if (!KINDS.includes(k as Kind) || !Number.isInteger(Number(seed))) cli.error(`--replay takes KIND:SEED, got ${s}`);
      return [k as Kind, Number(seed)];
    });
  } else {
    const seed = o.seed ?? Date.now() % 2 ** 31;
    console.error(`campaign seed ${seed} (--seed ${seed} runs the same trials again)`);
    const r = new Prng(seed);
    const total = kinds.reduce((s, k) => s + WEIGHTS[k], 0);
    plan = Array.from({ length: o.trials }, () => {
      let x = r.next() * total;
      const k = kinds.find((kk) => (x -= WEIGHTS[kk]) < 0) ?? kinds[kinds.length - 1]!;
      return [k, r.int(1, 2 ** 31 - 1)];
    });
  }
  console.error(`the managers' log: ${managerLog}`);
  const t0 = performance.now();
  const outcomes: Outcome[] = [];
  for (const [i, [kind, seed]] of plan.entries()) {
    if (o.minutes !== undefined && performance.now() - t0 > o.minutes * 60_000) {
      console.error(`stopped after ${o.minutes} minutes: ${plan.length - i} trials not run`);
      break;
    }
    const r = await runTrial(kind, seed);
    outcomes.push(r);
    console.error(
      `[${i + 1}/${plan.length}] ${kind}:${seed} ${r.what}: ${r.failures.length ? `FAILED (${r.failures.map((f) => f.kind).join(', ')})` : 'ok'} ${(r.ms / 1000).toFixed(1)} s`,
    );
    if (o.log) appendFileSync(o.log, `${JSON.stringify(r)}\n`);
  }
  console.log(summary(outcomes));
  process.exitCode = outcomes.some((x) => x.failures.length) ? 1 : 0;
}

await main();
