// Ports of PyTorch's test/test_multiprocessing_spawn.py (_TestMultiProcessing, SpawnTest),
// run for both start methods. Children coordinate with the test through files (see
// fixtures/files.ts), never through sleeps; every child a test starts is reaped.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, readFileSync, rmSync, watch, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { checkLeaks, openFds } from '../helpers/leaks.js';
import { reap, running } from '../helpers/procs.js';
import { waitForFile } from './fixtures/files.js';
import {
  startProcesses,
  spawn,
  ProcessContext,
  SpawnContext,
  ProcessException,
  ProcessRaisedException,
  ProcessExitedException,
  Pipe,
  PipeClosedError,
  Event as MpEvent,
  Queue,
  emptyCache,
  type StartMethod,
} from '../../src/index.js';
import { isCoded } from '../helpers/errors.js';

// libuv opens one inotify descriptor per event loop on the first fs.watch and keeps it for
// life: open it before the leak check takes its snapshot, or it reads as a leak.
before(() => watch(tmpdir()).close());
checkLeaks();

const MODULE = new URL('./fixtures/targets.js', import.meta.url);
const target = (name: string) => ({ module: MODULE, export: name });
const TIMEOUT = { timeout: 60_000 };

let root: string;
before(() => (root = mkdtempSync(join(tmpdir(), 'tensorproc-spawn-test-'))));
after(() => rmSync(root, { recursive: true, force: true }));
const freshDir = (): string => mkdtempSync(join(root, 'd-'));

/** Collects tensorproc's termination warnings while `fn` runs. */
async function warningsDuring(fn: () => Promise<void>): Promise<string[]> {
  const seen: string[] = [];
  const listen = (w: Error): void => {
    if (w.name === 'TensorprocWarning') seen.push(w.message);
  };
  process.on('warning', listen);
  try {
    await fn();
  } finally {
    // Warnings are emitted on the next tick: let them arrive before we stop listening.
    await new Promise((r) => setImmediate(r));
    process.off('warning', listen);
  }
  return seen;
}

const methods: StartMethod[] = ['spawn', 'thread'];
for (const startMethod of methods) {
  describe(`startMethod '${startMethod}'`, () => {
    it('success', TIMEOUT, async () => {
      await startProcesses(target('success'), { nprocs: 2, startMethod });
    });

    it('a pipe end given to a child and closed there is closed for the other end while the child runs', TIMEOUT, async () => {
      // spawn keeps copies of argument descriptors only until the child has its own (NOTE [Spawn arguments]).
      const [a, b] = Pipe();
      const done = new MpEvent();
      const ctx = startProcesses(target('closeEndThenWait'), { args: [b, done], join: false, startMethod });
      try {
        b.close(); // this process's copy
        await assert.rejects(a.recv(), isCoded(PipeClosedError, 'ERR_TP_PIPE_CLOSED'));
      } finally {
        done.set();
        while (!(await ctx.join()));
        a.close();
        done.close();
      }
    });

    it('success, non-blocking', TIMEOUT, async () => {
      const ctx = startProcesses(target('success'), { nprocs: 2, join: false, startMethod });
      await ctx.started;
      try {
        assert.ok(ctx instanceof ProcessContext);
        assert.equal(ctx.pids().length, 2);
        await ctx.join({ timeout: null });
        await ctx.join({ timeout: null });
        assert.equal(await ctx.join({ timeout: null }), true);
        for (const p of ctx.processes) assert.equal(p.exitCode, 0);
      } finally {
        await reap(ctx);
      }
    });

    it('join returns false on timeout', TIMEOUT, async () => {
      const dir = freshDir();
      const ctx = startProcesses(target('exitCode'), { args: [0, dir], nprocs: 2, join: false, startMethod });
      await ctx.started;
      try {
        await ctx.processes[0]!.exited;
        assert.equal(await ctx.join({ timeout: 0 }), false); // process 1 waits for dir/go
        writeFileSync(join(dir, 'go'), '');
        assert.equal(await ctx.join(), true);
      } finally {
        await reap(ctx);
      }
    });

    it('children start at once: pids() lists them while their target still loads; loaded resolves once it has', TIMEOUT, async () => {
      const dir = freshDir();
      process.env.TENSORPROC_TEST_IMPORT_GATE = join(dir, 'go');
      // A module of its own per start method: a module imports once per process.
      const ctx = startProcesses(
        { module: new URL(`./fixtures/import-gate.js?${startMethod}`, import.meta.url), export: 'run' },
        { nprocs: 2, join: false, startMethod },
      );
      try {
        assert.equal(ctx.pids().length, 2, 'as torch gives them: at once');
        for (const [i, p] of ctx.processes.entries()) {
          assert.equal(p.pid, ctx.pids()[i]);
          assert.equal(p.index, i);
          assert.match(p.name, /^Process-\d+$/);
          if (startMethod === 'spawn') assert.ok(running(p.pid), 'a process that runs');
        }
        await ctx.started; // they run...
        let loaded = false;
        void ctx.loaded.then(() => (loaded = true));
        // ...but cannot finish importing their target before dir/go exists.
        assert.equal(await ctx.join({ timeout: 50 }), false);
        assert.equal(loaded, false);
        writeFileSync(join(dir, 'go'), '');
        await ctx.loaded;
        assert.equal(await ctx.join(), true);
      } finally {
        delete process.env.TENSORPROC_TEST_IMPORT_GATE;
        writeFileSync(join(dir, 'go'), '');
        await reap(ctx);
      }
    });

    it('first argument is the index', TIMEOUT, async () => {
      const dir = freshDir();
      await startProcesses(target('writeIndex'), { args: [dir], nprocs: 2, startMethod });
      const got = readdirSync(dir).map((f) => Number(readFileSync(join(dir, f), 'utf8')));
      assert.deepEqual(got.sort(), [0, 1]);
    });

    it('large arguments arrive whole', TIMEOUT, async () => {
      const dir = freshDir();
      const big = 'x'.repeat(3 << 20); // many frames, more than a socket buffer holds
      await startProcesses(target('writeLength'), { args: [dir, big], nprocs: 2, startMethod });
      for (const i of [0, 1]) assert.equal(readFileSync(join(dir, `length-${i}`), 'utf8'), String(big.length));
    });

    it('exception in a single process', TIMEOUT, async () => {
      for (const which of [0, 1]) {
        const dir = freshDir();
        await assert.rejects(startProcesses(target('exceptionSingle'), { args: [which, dir], nprocs: 2, startMethod }), (e: unknown) => {
          assert.ok(e instanceof ProcessRaisedException);
          assert.equal(e.code, 'ERR_TP_PROCESS_RAISED');
          assert.equal(e.errorIndex, which);
          assert.match(
            e.message,
            new RegExp(
              `^\\n\\n-- Process ${which} terminated with the following error:\\nError: legitimate exception from process ${which}\\n    at `,
            ),
          );
          return true;
        });
      }
    });

    it('exception in all processes', TIMEOUT, async () => {
      await assert.rejects(startProcesses(target('exceptionAll'), { nprocs: 2, startMethod }), (e: unknown) => {
        assert.ok(e instanceof ProcessRaisedException);
        assert.match(e.message, /\nError: legitimate exception from process (0|1)\n/);
        assert.match(e.message, new RegExp(`-- Process ${e.errorIndex} terminated`));
        return true;
      });
    });

    it('terminated by a signal', TIMEOUT, async () => {
      const dir = freshDir();
      const ctx = startProcesses(target('readyThenWait'), { args: [dir], nprocs: 2, join: false, startMethod });
      await ctx.started;
      try {
        await waitForFile(join(dir, 'ready-0'));
        ctx.processes[0]!.kill('SIGKILL');
        await assert.rejects(ctx.join(), (e: unknown) => {
          assert.ok(e instanceof ProcessExitedException);
          assert.equal(e.code, 'ERR_TP_PROCESS_EXITED');
          assert.equal(e.message, 'process 0 terminated with signal SIGKILL');
          assert.equal(e.signalName, 'SIGKILL');
          assert.equal(e.exitCode, -9);
          assert.equal(e.errorIndex, 0);
          assert.equal(e.pid, ctx.pids()[0]);
          return true;
        });
        for (const p of ctx.processes) assert.equal(p.isAlive(), false);
      } finally {
        await reap(ctx);
      }
    });

    // Past setTimeout's limit a grace period is no limit at all (it once meant no grace).
    for (const gracePeriod of [null, 20_000, 2 ** 31, Infinity]) {
      it(`exit code, gracePeriod ${gracePeriod}`, TIMEOUT, async () => {
        const dir = freshDir();
        const ctx = startProcesses(target('exitCode'), { args: [123, dir], nprocs: 2, join: false, startMethod });
        await ctx.started;
        try {
          const pid1 = ctx.pids()[1];
          const warnings = await warningsDuring(async () => {
            const joined = ctx.join({ gracePeriod });
            if (gracePeriod !== null) {
              // Process 1 exits on its own inside the grace period once it may.
              await ctx.processes[0]!.exited;
              writeFileSync(join(dir, 'go'), '');
            }
            await assert.rejects(joined, (e: unknown) => {
              assert.ok(e instanceof ProcessExitedException);
              assert.equal(e.message, 'process 0 terminated with exit code 123');
              assert.equal(e.exitCode, 123);
              assert.equal(e.signalName, null);
              return true;
            });
          });
          if (gracePeriod === null) {
            assert.ok(warnings[0]?.includes(`Terminating process ${pid1} via signal SIGTERM`), String(warnings));
            assert.equal(ctx.processes[1]!.signalName, 'SIGTERM');
          } else {
            assert.deepEqual(warnings, []);
            assert.equal(ctx.processes[1]!.exitCode, 0);
          }
          for (const p of ctx.processes) assert.equal(p.isAlive(), false);
        } finally {
          await reap(ctx);
        }
      });
    }

    it('success first, then exception', TIMEOUT, async () => {
      const dir = freshDir();
      await assert.rejects(startProcesses(target('successThenException'), { args: [dir], nprocs: 2, startMethod }), (e: unknown) => {
        assert.ok(e instanceof ProcessRaisedException);
        assert.equal(e.errorIndex, 1);
        assert.match(e.message, /\nError: legitimate exception\n/);
        return true;
      });
    });

    it('exception raises ProcessRaisedException (fn called with too few args)', TIMEOUT, async () => {
      await assert.rejects(startProcesses(target('successThenException'), { args: [], nprocs: 1, startMethod }), ProcessRaisedException);
    });

    it('a signal from outside raises ProcessExitedException', TIMEOUT, async () => {
      const dir = freshDir();
      const ctx = startProcesses(target('readyThenWait'), { args: [dir], nprocs: 1, join: false, startMethod });
      await ctx.started;
      try {
        // A worker terminated while its module loader holds a file open leaks that
        // descriptor (a Node limitation): let a thread get going first.
        if (startMethod === 'thread') await waitForFile(join(dir, 'ready-0'));
        for (const [i, pid] of ctx.pids().entries()) {
          if (startMethod === 'spawn') process.kill(pid, 'SIGTERM');
          else ctx.processes[i]!.kill('SIGTERM');
        }
        await assert.rejects(ctx.join(), (e: unknown) => {
          assert.ok(e instanceof ProcessExitedException);
          assert.equal(e.signalName, 'SIGTERM');
          assert.equal(e.exitCode, -15);
          return true;
        });
      } finally {
        await reap(ctx);
      }
    });

    it('process exited with a code', TIMEOUT, async () => {
      await assert.rejects(startProcesses(target('exit12'), { nprocs: 1, startMethod }), (e: unknown) => {
        assert.ok(e instanceof ProcessExitedException);
        assert.equal(e.exitCode, 12);
        assert.equal(e.message, 'process 0 terminated with exit code 12');
        return true;
      });
    });

    it("exceptions keep the child error's fields and cause chain", TIMEOUT, async () => {
      const ctx = startProcesses(target('richError'), { nprocs: 1, join: false, startMethod });
      await ctx.started;
      try {
        const e = await ctx.join().then(
          () => assert.fail('join should throw'),
          (x: unknown) => x,
        );
        assert.ok(e instanceof ProcessRaisedException && e instanceof ProcessException);
        assert.equal(e.pid, ctx.pids()[0]);
        assert.match(e.message, /\nError: rich error from 0\n[\s\S]*\nCaused by: RangeError: root cause\n/);
        const cause = e.cause as Error & { code: string; details: unknown; hook: unknown; cause: Error & { errno: number } };
        assert.equal(cause.message, 'rich error from 0');
        assert.equal(cause.code, 'E_FIXTURE');
        assert.deepEqual(cause.details, { rank: 0 });
        assert.equal(typeof cause.hook, 'string'); // a function field arrives as its inspect() text
        assert.equal(cause.cause.name, 'RangeError');
        assert.equal(cause.cause.errno, -28);
        // join() again throws the same error
        await assert.rejects(ctx.join(), (again: unknown) => again === e);
      } finally {
        await reap(ctx);
      }
    });

    it('a thrown non-error and an uncaught error after fn returned are reported', TIMEOUT, async () => {
      await assert.rejects(startProcesses(target('throwString'), { startMethod }), /Uncaught 'plain string'/);
      await assert.rejects(startProcesses(target('uncaughtLater'), { startMethod }), (e: unknown) => {
        assert.ok(e instanceof ProcessRaisedException);
        assert.match(e.message, /Error: uncaught in a timer/);
        return true;
      });
    });
  });
}

describe('spawn()', () => {
  it('uses processes, and SpawnContext is ProcessContext', TIMEOUT, async () => {
    assert.equal(SpawnContext, ProcessContext);
    const ctx = spawn(target('success'), { nprocs: 2, join: false });
    await ctx.started;
    try {
      assert.equal(ctx.pids().length, 2);
      assert.ok(ctx.processes.every((p) => p.startMethod === 'spawn'));
      assert.ok(ctx.pids().every((pid) => pid !== process.pid && pid > 0));
      assert.equal(await ctx.join(), true);
    } finally {
      await reap(ctx);
    }
  });

  it('a process that kills itself with a signal (upstream test_terminate_signal)', TIMEOUT, async () => {
    const dir = freshDir();
    await assert.rejects(spawn(target('signalSelf'), { args: ['SIGKILL', dir], nprocs: 2 }), {
      name: 'ProcessExitedException',
      message: 'process 0 terminated with signal SIGKILL',
    });
  });
});

describe('stopping a thread child (NOTE [Stopping a thread child])', () => {
  it('terminate() lets the thread close everything it held: its descriptors do not outlive it', TIMEOUT, async () => {
    // Threads share the process's descriptors: what a terminated thread left open would
    // show here. Before the stop message, worker.terminate() ran no exit handler.
    const before = new Set(openFds().keys());
    const q = new Queue();
    const ready = new MpEvent();
    const ctx = startProcesses(target('holdThenWait'), { args: [q, ready], join: false, startMethod: 'thread' });
    try {
      await ready.wait();
      ctx.processes[0]!.terminate();
      await assert.rejects(ctx.join(), (e: unknown) => {
        assert.ok(e instanceof ProcessExitedException);
        assert.equal(e.signalName, 'SIGTERM');
        return true;
      });
    } finally {
      await reap(ctx);
      q.close();
      ready.close();
    }
    emptyCache();
    assert.deepEqual(
      [...openFds().keys()].filter((fd) => !before.has(fd)),
      [],
      'descriptors the thread held are closed',
    );
  });

  it('a stopped thread stops its own thread children first: nothing they held outlives them', TIMEOUT, async () => {
    // A worker's exit terminates the workers it started, without their exit handlers.
    const before = new Set(openFds().keys());
    const ready = new MpEvent();
    const ctx = startProcesses(target('nestThenWait'), { args: [ready], join: false, startMethod: 'thread' });
    try {
      await ready.wait();
      ctx.processes[0]!.terminate();
      await assert.rejects(ctx.join(), (e: unknown) => e instanceof ProcessExitedException && e.signalName === 'SIGTERM');
    } finally {
      await reap(ctx);
      ready.close();
    }
    emptyCache();
    assert.deepEqual(
      [...openFds().keys()].filter((fd) => !before.has(fd)),
      [],
      'descriptors the threads held are closed',
    );
  });

  it('a thread that cannot take the stop (a synchronous loop) is terminated all the same', TIMEOUT, async () => {
    const dir = freshDir();
    const ctx = startProcesses(target('spinAfterReady'), { args: [dir], join: false, startMethod: 'thread' });
    try {
      await waitForFile(join(dir, 'ready-0'));
      ctx.processes[0]!.terminate();
      await ctx.processes[0]!.exited;
      assert.equal(ctx.processes[0]!.signalName, 'SIGTERM');
    } finally {
      await reap(ctx);
    }
  });

  for (const [how, code, signal] of [
    ['returned', 0, 'SIGTERM'],
    ['exited with code 1', 1, 'SIGKILL'],
  ] as const) {
    it(`a thread that ${how} on its own before ${signal} reached it reports its own exit code, as a process does`, TIMEOUT, async () => {
      const tasks = (): number => readdirSync('/proc/self/task').length;
      const ctx =
        code === 0
          ? startProcesses(target('success'), { join: false, startMethod: 'thread' })
          : startProcesses(target('exitCode'), { args: [1, freshDir()], join: false, startMethod: 'thread' });
      try {
        await ctx.started;
        // Block this event loop until the thread is gone from the process, so that its 'exit'
        // event has not been handled yet when terminate() comes.
        const running = tasks();
        const nap = new Int32Array(new SharedArrayBuffer(4));
        const deadline = performance.now() + 20_000;
        while (tasks() >= running) {
          if (performance.now() > deadline) throw new Error('the thread did not end');
          Atomics.wait(nap, 0, 0, 1);
        }
        ctx.processes[0]!.kill(signal);
        if (code === 0) assert.equal(await ctx.join(), true);
        else await assert.rejects(ctx.join(), (e: unknown) => e instanceof ProcessExitedException && e.exitCode === 1);
        assert.equal(ctx.processes[0]!.exitCode, code);
        assert.equal(ctx.processes[0]!.signalName, null);
      } finally {
        await reap(ctx);
      }
    });
  }

  it('SIGKILL after an unheeded SIGTERM ends the thread at once and is what is reported', TIMEOUT, async () => {
    const dir = freshDir();
    const ctx = startProcesses(target('spinAfterReady'), { args: [dir], join: false, startMethod: 'thread' });
    try {
      await waitForFile(join(dir, 'ready-0'));
      ctx.processes[0]!.kill('SIGTERM');
      ctx.processes[0]!.kill('SIGKILL');
      await ctx.processes[0]!.exited;
      assert.equal(ctx.processes[0]!.signalName, 'SIGKILL');
      assert.equal(ctx.processes[0]!.exitCode, -9);
    } finally {
      await reap(ctx);
    }
  });
});
