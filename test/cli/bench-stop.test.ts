// NOTE [Ending what the bench started] (and NOTE [Closed pipe], whose runner exits the same
// way): a bench that stops while torch's W1 anchor runs ends the anchor and the producer and
// consumer it started (pythons of their own, start method spawn), not only the workload program.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { readFileSync, readdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { checkLeaks } from '../helpers/leaks.js';
import { running } from '../helpers/procs.js';
import { waitFor } from '../helpers/wait.js';

checkLeaks();
const cli = fileURLToPath(new URL('../../src/cli/main.js', import.meta.url));

/** Every process below `pid`, read from /proc: its children, theirs, and so on. */
function descendants(pid: number): number[] {
  const out: number[] = [];
  const visit = (p: number): void => {
    let tasks: string[];
    try {
      tasks = readdirSync(`/proc/${p}/task`);
    } catch {
      return; // gone
    }
    for (const t of tasks) {
      let kids = '';
      try {
        kids = readFileSync(`/proc/${p}/task/${t}/children`, 'utf8');
      } catch {
        continue;
      }
      for (const k of kids.trim().split(/\s+/).filter(Boolean).map(Number)) {
        out.push(k);
        visit(k);
      }
    }
  };
  visit(pid);
  return out;
}

const cmdline = (pid: number): string => {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' ');
  } catch {
    return '';
  }
};

/** Whether some python3 imports torch here (the bench's own search: the pyenv one may lack it). */
const hasTorch = ['python3', '/usr/bin/python3'].some((p) => spawnSync(p, ['-c', 'import torch'], { stdio: 'ignore' }).status === 0);

test("a bench asked to stop while torch runs ends torch's anchor and the processes it started", {
  skip: hasTorch ? false : 'no python3 here imports torch',
}, async () => {
  // W1 at 1 KiB alone, the yardstick's count: torch's file_descriptor pair (one producer, one
  // consumer) takes 25-40 s here for its 50,000 messages, so that what is left running is seen.
  const child = spawn(process.execPath, [cli, 'bench', '--json', '--only', 'W1'], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, TENSORPROC_BENCH_W1_SIZES: '1024' },
  });
  let stderr = '';
  child.stderr.setEncoding('utf8').on('data', (s: string) => (stderr += s));
  child.stdout.resume();
  const closed = new Promise<{ status: number | null; signal: string | null }>((resolve) =>
    child.on('close', (status, signal) => resolve({ status, signal })),
  );
  let seen: number[] = [];
  try {
    // Nothing tells a reader when torch's children have started but /proc: polled, bounded.
    await waitFor(() => {
      const all = descendants(child.pid!);
      const anchor = all.find((p) => cmdline(p).includes('torch-queue.py file_descriptor'));
      if (anchor === undefined || descendants(anchor).filter((p) => cmdline(p).includes('spawn_main')).length < 2) return false;
      seen = all;
      return true;
    }, 120_000);
    assert.ok(seen.length >= 4, `the workload program, the anchor and its producer and consumer: ${seen.map(cmdline).join(' | ')}`);
    // What the runner's exit does for a reader that closed the pipe (the next record's write
    // gets EPIPE, a moment the test cannot choose), a `kill` does at once: the runner ends
    // its workload program, which ends the anchor, each as a process group.
    child.kill('SIGTERM');
    const exit = await closed;
    // They are not ours to reap. Left running, torch's pair would measure for tens of seconds more.
    await waitFor(() => !seen.some(running), 10_000).catch(() => {});
    assert.deepEqual(seen.filter(running).map(cmdline), [], 'everything the bench had started has ended');
    assert.deepEqual(exit, { status: 128 + 15, signal: null }, `the runner exits through its handler, as for SIGTERM: ${stderr}`);
  } finally {
    // A failed run leaves nothing behind: the runner, and whatever of its tree is still there.
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    await closed;
    for (const p of seen.filter(running)) process.kill(p, 'SIGKILL');
  }
});
