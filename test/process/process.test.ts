// mp.Process (Python's multiprocessing.Process), mp.currentProcess(), mp.parentProcess(),
// the sharing strategy children inherit, and starting children with no descriptors left.
// Run for both start methods; every child a test starts is reaped.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, watch } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { waitForFile } from './fixtures/files.js';
import { checkLeaks } from '../helpers/leaks.js';
import { isCoded, throwsCoded } from '../helpers/errors.js';
import { segmentOf } from '../helpers/segments.js';
import { fixture } from '../helpers/child.js';
import * as mp from '../../src/index.js';

// libuv opens one inotify descriptor per event loop on the first fs.watch and keeps it for
// life: open it before the leak check takes its snapshot, or it reads as a leak.
before(() => watch(tmpdir()).close());
checkLeaks();

const MODULE = new URL('./fixtures/process-targets.js', import.meta.url);
const target = (name: string) => ({ module: MODULE, export: name });
const TIMEOUT = { timeout: 60_000 };

// Every Process a test made is killed and awaited at the end, whatever happened.
const made: mp.Process[] = [];
function make(options: mp.ProcessOptions): mp.Process {
  const p = new mp.Process(options);
  made.push(p);
  return p;
}
after(async () => {
  for (const p of made.splice(0)) {
    try {
      if (p.isAlive()) p.kill();
      if (p.pid !== null) await p.join();
    } catch {
      // closed: it had exited
    }
  }
});

/** Collects what is written on this process's stderr while `fn` runs. */
async function stderrDuring(fn: () => Promise<void>): Promise<string> {
  const write = process.stderr.write;
  let text = '';
  process.stderr.write = ((chunk: string | Uint8Array) => {
    text += String(chunk);
    return true;
  }) as typeof process.stderr.write;
  try {
    await fn();
  } finally {
    process.stderr.write = write;
  }
  return text;
}

for (const startMethod of ['spawn', 'thread'] as const) {
  describe(`Process, startMethod '${startMethod}'`, () => {
    it('start(), join(): the pid at once, exit code 0, fn(...args) with no index', TIMEOUT, async () => {
      const q = new mp.Queue<any>();
      try {
        const p = make({ target: target('report'), args: [q, 'a', 2, { three: [3] }], startMethod });
        assert.equal(p.pid, null);
        assert.equal(p.exitCode, null);
        assert.equal(p.isAlive(), false);
        p.start();
        assert.equal(typeof p.pid, 'number', 'the pid is known when start() returns');
        assert.equal(p.ident, p.pid);
        if (startMethod === 'spawn') assert.notEqual(p.pid, process.pid);
        const got = await q.get({ timeout: 30_000 });
        await p.join();
        assert.deepEqual(got.args, ['a', 2, { three: [3] }]);
        assert.equal(p.exitCode, 0);
        assert.equal(p.signalName, null);
        assert.equal(p.error, null);
        assert.equal(p.isAlive(), false);
        await p.join(); // again: at once
        p.close();
        p.close();
      } finally {
        q.close();
      }
    });

    it('its name, and currentProcess() and parentProcess() in the child', TIMEOUT, async () => {
      const q = new mp.Queue<any>();
      try {
        const p = make({ target: target('report'), args: [q], startMethod });
        assert.match(p.name, /^Process-\d+$/);
        const named = make({ target: target('report'), args: [q], startMethod, name: 'loader', daemon: true });
        assert.equal(named.name, 'loader');
        assert.equal(named.daemon, true);
        p.start();
        const a = await q.get({ timeout: 30_000 });
        named.start();
        const b = await q.get({ timeout: 30_000 });
        await p.join();
        await named.join();
        assert.deepEqual(a.current, { name: p.name, pid: p.pid, daemon: false, startMethod });
        assert.deepEqual(b.current, { name: 'loader', pid: named.pid, daemon: true, startMethod });
        for (const r of [a, b]) assert.deepEqual(r.parent, { name: 'MainProcess', pid: process.pid, daemon: false, startMethod: null });
        assert.deepEqual({ ...mp.currentProcess() }, { name: 'MainProcess', pid: process.pid, daemon: false, startMethod: null });
        assert.equal(mp.parentProcess(), null);
      } finally {
        q.close();
      }
    });

    it("a child's child is named after it ('Process-N:1') and has it as its parent", TIMEOUT, async () => {
      const q = new mp.Queue<any>();
      try {
        const p = make({ target: target('nested'), args: [q, startMethod], startMethod });
        p.start();
        const grandchild = await q.get({ timeout: 30_000 });
        const child = await q.get({ timeout: 30_000 });
        await p.join();
        assert.equal(p.exitCode, 0);
        assert.deepEqual([grandchild.args, child.args], [['grandchild'], ['child']]);
        assert.equal(grandchild.current.name, `${p.name}:1`);
        assert.deepEqual(grandchild.parent, child.current);
        assert.equal(child.current.name, p.name);
      } finally {
        q.close();
      }
    });

    it('exit codes, and signals as negative exit codes (Python)', TIMEOUT, async () => {
      const p = make({ target: target('exitWith'), args: [12], startMethod });
      p.start();
      await p.join();
      assert.equal(p.exitCode, 12);
      assert.equal(p.error, null);
      // A thread ended by SIGKILL cleans up nothing, as a killed process: it is given no Event to hold.
      const dir = mkdtempSync(join(tmpdir(), 'tensorproc-process-test-'));
      try {
        for (const [stop, code, signal] of [
          ['kill', -9, 'SIGKILL'],
          ['terminate', -15, 'SIGTERM'],
        ] as const) {
          const file = join(dir, stop);
          const w = make({ target: target('readyFileThenWait'), args: [file], startMethod });
          w.start();
          await waitForFile(file);
          assert.equal(w.isAlive(), true);
          w[stop]();
          await w.join();
          assert.equal(w.exitCode, code);
          assert.equal(w.signalName, signal);
          assert.equal(w.isAlive(), false);
          w.kill(); // once it has exited: nothing
          w.terminate();
        }
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });

    it('join(timeout) returns while the child runs; it runs on', TIMEOUT, async () => {
      const ready = new mp.Event();
      try {
        const p = make({ target: target('readyThenWait'), args: [ready], startMethod });
        p.start();
        await ready.wait();
        await p.join(0);
        await p.join(5);
        assert.equal(p.isAlive(), true);
        assert.equal(p.exitCode, null);
        assert.throws(() => p.close(), isCoded(mp.ProcessStateError, 'ERR_TP_PROCESS_STATE'));
        p.terminate();
        await p.join();
        assert.equal(p.exitCode, -15);
      } finally {
        ready.close();
      }
    });

    it(
      'a child that throws exits with code 1; its error is on the Process, and printed on stderr as Python prints it',
      TIMEOUT,
      async () => {
        const p = make({ target: target('throwIt'), args: ['bad rank'], startMethod });
        const printed = await stderrDuring(async () => {
          p.start();
          await p.join();
        });
        assert.equal(p.exitCode, 1);
        assert.equal(p.error, p.error, 'one error object');
        const e = p.error as Error & { code: string };
        assert.equal(e.name, 'RangeError');
        assert.ok(e instanceof RangeError, 'a built-in class is rebuilt as itself');
        assert.equal(e.message, 'bad rank');
        assert.equal(e.code, 'E_FIXTURE');
        assert.match(printed, new RegExp(`^Process ${p.name}:\\nRangeError: bad rank\\n    at throwIt `));
      },
    );

    it('a target the child cannot load: exit code 1, and the coded error from the child', TIMEOUT, async () => {
      for (const [t, cls, code] of [
        [target('nope'), mp.TargetNotFunctionError, 'ERR_TP_TARGET_NOT_FUNCTION'],
        [{ module: '/nonexistent/dir/target.js' }, mp.TargetNotFoundError, 'ERR_TP_TARGET_NOT_FOUND'],
      ] as const) {
        const p = make({ target: t, startMethod });
        const printed = await stderrDuring(async () => {
          p.start();
          await p.join();
        });
        assert.equal(p.exitCode, 1);
        isCoded(cls, code)(p.error);
        const e = p.error as InstanceType<typeof cls>;
        assert.deepEqual([e.pid, e.errorIndex], [p.pid, null]);
        assert.match(e.message, new RegExp(`^The process \\(pid ${p.pid}\\) could not load its target: `));
        if (cls === mp.TargetNotFunctionError) assert.match(e.message, /called as fn\(\.\.\.args\)/);
        assert.ok(printed.startsWith(`Process ${p.name}:\n${e.message}`), printed);
      }
    });

    it('a tensor argument is the same memory', TIMEOUT, async () => {
      const t = mp.full([8], 1, { shared: true });
      try {
        const p = make({ target: target('addOne'), args: [t], startMethod });
        p.start();
        await p.join();
        assert.equal(p.exitCode, 0);
        assert.deepEqual(t.toArray(), [2, 2, 2, 2, 2, 2, 2, 2]);
      } finally {
        t.release();
      }
    });

    it("children start with the parent's sharing strategy, unless they choose their own", TIMEOUT, async () => {
      const q = new mp.Queue<any>();
      mp.setSharingStrategy('file_system');
      try {
        const a = make({ target: target('sendShared'), args: [q], startMethod });
        a.start();
        const got = await q.get({ timeout: 30_000 });
        await a.join();
        assert.equal(got.strategy, 'file_system');
        assert.equal(segmentOf(got.t).strategy, 'file_system', 'what the child made is a named segment');
        got.t.release();
        const b = make({ target: target('ownStrategy'), args: [q], startMethod });
        b.start();
        assert.equal((await q.get({ timeout: 30_000 })).strategy, 'file_descriptor');
        await b.join();
        mp.setSharingStrategy('file_descriptor');
        const c = make({ target: target('report'), args: [q], startMethod });
        c.start();
        assert.equal((await q.get({ timeout: 30_000 })).strategy, 'file_descriptor');
        await c.join();
      } finally {
        mp.setSharingStrategy('file_descriptor');
        q.close();
      }
    });
  });
}

describe('Process: misuse is a coded error', () => {
  it('start twice, join before start, close while it runs, anything after close, daemon after start', TIMEOUT, async () => {
    const ready = new mp.Event();
    try {
      const p = make({ target: target('readyThenWait'), args: [ready] });
      await assert.rejects(p.join(), isCoded(mp.ProcessStateError, 'ERR_TP_PROCESS_STATE'));
      throwsCoded(() => p.terminate(), mp.ProcessStateError, 'ERR_TP_PROCESS_STATE');
      throwsCoded(() => p.kill(), mp.ProcessStateError, 'ERR_TP_PROCESS_STATE');
      p.daemon = true; // before start: allowed
      p.daemon = false;
      p.start();
      throwsCoded(() => p.start(), mp.ProcessStateError, 'ERR_TP_PROCESS_STATE');
      throwsCoded(() => (p.daemon = true), mp.ProcessStateError, 'ERR_TP_PROCESS_STATE');
      await ready.wait();
      const e = throwsCoded(() => p.close(), mp.ProcessStateError, 'ERR_TP_PROCESS_STATE');
      assert.match(e.message, /still running: join\(\) or terminate\(\) it before close\(\)/);
      await assert.rejects(p.join(-1), isCoded(mp.InvalidArgumentError, 'ERR_TP_INVALID_ARGUMENT'));
      p.kill();
      await p.join();
      p.close();
      for (const use of [() => p.pid, () => p.exitCode, () => p.isAlive(), () => p.start(), () => p.kill(), () => p.error]) {
        throwsCoded(use, mp.ProcessStateError, 'ERR_TP_PROCESS_STATE');
      }
      await assert.rejects(p.join(), isCoded(mp.ProcessStateError, 'ERR_TP_PROCESS_STATE'));
      assert.match(p.name, /^Process-/, 'the name can still be read');
    } finally {
      ready.close();
    }
  });

  it('bad options: InvalidArgumentError, and nothing starts', () => {
    const bad: unknown[] = [
      undefined,
      'opts',
      {},
      { target: null },
      { target: { module: 5 } },
      { target: target('report'), args: 'x' },
      { target: target('report'), name: 5 },
      { target: target('report'), daemon: 'yes' },
      { target: target('report'), startMethod: 'fork' },
      { target: target('report'), argz: [] },
    ];
    for (const options of bad) {
      throwsCoded(() => new mp.Process(options as mp.ProcessOptions), mp.InvalidArgumentError, 'ERR_TP_INVALID_ARGUMENT');
    }
    const p = make({ target: target('report') });
    throwsCoded(() => (p.name = 3 as never), mp.InvalidArgumentError, 'ERR_TP_INVALID_ARGUMENT');
    throwsCoded(() => (p.daemon = 'no' as never), mp.InvalidArgumentError, 'ERR_TP_INVALID_ARGUMENT');
    // Arguments that cannot travel are refused by start(), naming their path.
    const q = make({ target: target('report'), args: [{ f: () => 1 }] });
    const e = throwsCoded(() => q.start(), mp.NotTransferableError, 'ERR_TP_NOT_TRANSFERABLE');
    assert.equal(e.path, 'args[0].f');
    assert.equal(q.pid, null, 'not started');
  });
});

describe('out of descriptors', () => {
  it('starting a child with no descriptors left is a TooManyFilesError, never a bare EMFILE, and leaves nothing behind', {
    timeout: 120_000,
  }, () => {
    // A program of its own under a low limit: it fills every free descriptor, then starts
    // children with k of them free (NOTE in src/process/descriptors.ts).
    const out = execFileSync(
      'sh',
      ['-c', `ulimit -n 120 && exec "${process.execPath}" "${fixture(import.meta.url, 'out-of-descriptors.js')}"`],
      { encoding: 'utf8', timeout: 110_000 },
    );
    const r = JSON.parse(out.trim().split('\n').pop()!);
    for (const how of ['spawn', 'thread', 'Process']) {
      const outcomes = r[how] as string[];
      assert.equal(
        outcomes[0],
        'thrown: TooManyFilesError ERR_TP_TOO_MANY_FILES',
        `${how}, no descriptor free: thrown by the start itself`,
      );
      for (const o of outcomes) assert.match(o, /^(ran|(thrown|join): TooManyFilesError ERR_TP_TOO_MANY_FILES)$/, `${how}: ${outcomes}`);
      assert.ok(outcomes.includes('ran') || how === 'thread', `${how}: with a few free, it runs (${outcomes})`);
    }
    assert.equal(r.leaked, 0, 'no descriptor left open');
    assert.equal(r.children, '', 'no child left');
  });
});
