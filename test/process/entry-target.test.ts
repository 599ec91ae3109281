// The single-file script (NOTE [Loading the target in the child]): a program that names its
// own entry module as the target, with its main code awaited at top level behind a guard,
// works under both start methods, both `join` values and with Process; its children start
// with the parent's sharing strategy. Each case is a program of its own (the entry module
// is what process.argv[1] names).
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { checkLeaks } from '../helpers/leaks.js';
import { fixture } from '../helpers/child.js';

checkLeaks();

interface Case {
  startMethod: 'spawn' | 'thread';
  join: boolean;
  guard: 'parentProcess' | 'isMainThread' | 'argv';
  how?: 'spawn' | 'Process';
  script?: string;
}

function runProgram(c: Case): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [fixture(import.meta.url, c.script ?? 'single-file.js')], {
    encoding: 'utf8',
    timeout: 50_000,
    killSignal: 'SIGKILL', // its children die with it
    env: {
      ...process.env,
      TP_TEST_START_METHOD: c.startMethod,
      TP_TEST_JOIN: String(c.join),
      TP_TEST_GUARD: c.guard,
      TP_TEST_HOW: c.how ?? 'spawn',
    },
  });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

function assertWorked(c: Case): void {
  const r = runProgram(c);
  assert.equal(r.status, 0, r.stderr);
  const { pids, got } = JSON.parse(r.stdout.trim().split('\n').pop()!);
  if (!c.join || c.how === 'Process') {
    assert.equal(pids.length, 2, 'pids() right after the start lists both');
    assert.ok(pids.every((p: number) => Number.isInteger(p) && p > 0));
  }
  const names = got.map((m: { name: string }) => m.name).sort();
  assert.deepEqual(names, ['Process-1', 'Process-2']);
  for (const m of got) {
    assert.equal(m.parent, 'MainProcess');
    assert.equal(m.strategy, 'file_system', "the parent's setSharingStrategy('file_system') is the children's");
  }
  if (c.how === 'Process') assert.deepEqual(got.map((m: { args: number[] }) => m.args[0]).sort(), [0, 1], 'fn(...args), no index');
}

const TIMEOUT = { timeout: 60_000 };

describe('the single-file script, guarded by `mp.parentProcess() === null`', () => {
  for (const startMethod of ['spawn', 'thread'] as const) {
    for (const join of [true, false]) {
      it(`${startMethod}, join: ${join}`, TIMEOUT, () => assertWorked({ startMethod, join, guard: 'parentProcess' }));
    }
    it(`${startMethod}, with Process`, TIMEOUT, () => assertWorked({ startMethod, join: true, guard: 'parentProcess', how: 'Process' }));
  }
  it('the same program in a module the entry imports (Node exited with code 13 when the parent imported the target)', TIMEOUT, () => {
    assertWorked({ startMethod: 'spawn', join: false, guard: 'parentProcess', script: 'imports-single-file.js' });
  });
});

describe('other guards', () => {
  for (const startMethod of ['spawn', 'thread'] as const) {
    it(`${startMethod}: process.argv[1] === fileURLToPath(import.meta.url)`, TIMEOUT, () =>
      assertWorked({ startMethod, join: true, guard: 'argv' }),
    );
  }
  it("thread: worker_threads' isMainThread", TIMEOUT, () => assertWorked({ startMethod: 'thread', join: false, guard: 'isMainThread' }));

  it(
    'spawn: isMainThread is true in a process child too, so its import starts processes again: refused, not processes without end',
    TIMEOUT,
    () => {
      const r = runProgram({ startMethod: 'spawn', join: true, guard: 'isMainThread' });
      assert.notEqual(r.status, 0);
      // The top-level await rejects with the child's coded error, which names the refusal.
      assert.match(r.stderr, /TargetLoadError: Process [01] \(pid \d+\) could not load its target: /);
      assert.match(r.stderr, /code: 'ERR_TP_TARGET_LOAD'/);
      assert.match(r.stderr, /still importing its target module/);
      assert.match(r.stderr, /code: 'ERR_TP_SPAWN_IN_BOOTSTRAP'/);
    },
  );
});
