// Bad options to spawn()/startProcesses() are a coded error before any child starts; a
// target that a child cannot load is a coded error from that child; the exception classes
// take torch's constructor arguments and keep their fields.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { checkLeaks } from '../helpers/leaks.js';
import {
  spawn,
  startProcesses,
  type ProcessContext,
  InvalidArgumentError,
  NotTransferableError,
  SpawnInBootstrapError,
  TargetLoadError,
  TargetNotFoundError,
  TargetNotFunctionError,
  ProcessException,
  ProcessExitedException,
  ProcessRaisedException,
  isTensorprocError,
  Queue,
  full,
  setSharingStrategy,
} from '../../src/index.js';
import { decodeArgs, PLAIN } from '../../src/process/args.js';
import { encodeArgs } from '../../src/process/args-encode.js';
import { addon } from '../../src/native/index.js';
import { segmentOf } from '../helpers/segments.js';
import { isCoded } from '../helpers/errors.js';
import { reap } from '../helpers/procs.js';

checkLeaks();

const MODULE = new URL('./fixtures/targets.js', import.meta.url);
const ok = { module: MODULE, export: 'success' };
/** spawn() as JavaScript callers see it: any options at all, a Promise back. */
const spawnAny = spawn as (target: unknown, options?: unknown) => Promise<void>;

/** Asserts the class and code, and that no child process was started meanwhile. */
async function rejectsCoded(p: Promise<unknown>, cls: Function, code: string): Promise<Error> {
  const before = children();
  let caught: unknown;
  await p.catch((e: unknown) => (caught = e));
  assert.ok(caught instanceof cls, `expected ${cls.name}, got ${String(caught)}`);
  assert.equal((caught as { code: string }).code, code);
  assert.deepEqual(children(), before, 'a child was started');
  return caught as Error;
}

function children(): string {
  // Our own child processes, from the kernel's list (one per thread of ours).
  return readdirSync('/proc/self/task')
    .map((t: string) => readFileSync(`/proc/self/task/${t}/children`, 'utf8').trim())
    .filter(Boolean)
    .join(' ');
}

describe('bad options are a coded error before any process starts', () => {
  it('a target that is not { module, export }', async () => {
    await rejectsCoded(spawn(null as never), InvalidArgumentError, 'ERR_TP_INVALID_ARGUMENT');
    await rejectsCoded(spawn((() => {}) as never), InvalidArgumentError, 'ERR_TP_INVALID_ARGUMENT');
    await rejectsCoded(spawn({ module: MODULE, export: 3 } as never), InvalidArgumentError, 'ERR_TP_INVALID_ARGUMENT');
    await rejectsCoded(spawn({ module: '' }), InvalidArgumentError, 'ERR_TP_INVALID_ARGUMENT');
  });

  it('nprocs not a positive integer', async () => {
    for (const nprocs of [0, -1, 1.5, NaN, '2', Infinity]) {
      await rejectsCoded(spawn(ok, { nprocs: nprocs as number }), InvalidArgumentError, 'ERR_TP_INVALID_ARGUMENT');
    }
  });

  it('an unknown start method, args not an array', async () => {
    await rejectsCoded(startProcesses(ok, { startMethod: 'fork' as never }), InvalidArgumentError, 'ERR_TP_INVALID_ARGUMENT');
    await rejectsCoded(spawn(ok, { args: 'x' as never }), InvalidArgumentError, 'ERR_TP_INVALID_ARGUMENT');
  });

  it('options that are not an object, of the wrong kind, or that do not exist', async () => {
    for (const options of ['opts', 5, null, [], true]) {
      const e = await rejectsCoded(spawnAny(ok, options), InvalidArgumentError, 'ERR_TP_INVALID_ARGUMENT');
      assert.match(e.message, /options must be an object/);
    }
    for (const options of [{ join: 'yes' }, { join: 0 }, { daemon: 'no' }, { daemon: null }]) {
      const e = await rejectsCoded(spawnAny(ok, options), InvalidArgumentError, 'ERR_TP_INVALID_ARGUMENT');
      assert.match(e.message, /must be true or false/);
    }
    // A misspelt option (torch's start_method, a typo) is not silently ignored.
    for (const [call, key] of [
      [() => spawnAny(ok, { nproc: 2 }), 'nproc'],
      [() => (startProcesses as typeof spawnAny)(ok, { start_method: 'thread' }), 'start_method'],
    ] as const) {
      const e = await rejectsCoded(call(), InvalidArgumentError, 'ERR_TP_INVALID_ARGUMENT');
      assert.match(e.message, new RegExp(`no option '${key}'`));
    }
    // spawn() always uses processes: it has no startMethod.
    await rejectsCoded(spawnAny(ok, { startMethod: 'thread' }), InvalidArgumentError, 'ERR_TP_INVALID_ARGUMENT');
  });

  it('with join: false, bad options are thrown at once (no Promise left to reject unseen)', () => {
    const before = children();
    for (const options of [{ nprocs: 0 }, { nproc: 2 }, { daemon: 'yes' }, { args: 'x' }]) {
      assert.throws(() => spawn(ok, { ...options, join: false } as never), isCoded(InvalidArgumentError, 'ERR_TP_INVALID_ARGUMENT'));
    }
    assert.throws(() => spawn({ module: 7 } as never, { join: false }), isCoded(InvalidArgumentError, 'ERR_TP_INVALID_ARGUMENT'));
    assert.deepEqual(children(), before, 'a child was started');
  });

  it('arguments that cannot travel name their path', async () => {
    const cases: [unknown[], string][] = [
      [[1, { fn: () => 1 }], 'args[1].fn'],
      [[Symbol('s')], 'args[0]'],
      [[{ deep: [{ 'not id': new WeakMap() }] }], 'args[0].deep[0]["not id"]'],
      [[new Map([['k', () => {}]])], 'args[0].get("k")'],
      [[Promise.resolve()], 'args[0]'],
    ];
    for (const startMethod of ['spawn', 'thread'] as const) {
      for (const [args, path] of cases) {
        const e = await rejectsCoded(startProcesses(ok, { args, startMethod }), NotTransferableError, 'ERR_TP_NOT_TRANSFERABLE');
        assert.equal((e as NotTransferableError).path, path);
        assert.ok(e.message.startsWith(path), e.message);
        assert.ok(e instanceof TypeError);
      }
    }
  });

  it('join() options are checked', async () => {
    const ctx = spawn(ok, { join: false });
    try {
      await assert.rejects(ctx.join({ timeout: -1 }), isCoded(InvalidArgumentError, 'ERR_TP_INVALID_ARGUMENT'));
      await assert.rejects(ctx.join({ gracePeriod: 'x' as never }), isCoded(InvalidArgumentError, 'ERR_TP_INVALID_ARGUMENT'));
      await assert.rejects(ctx.join('5' as never), isCoded(InvalidArgumentError, 'ERR_TP_INVALID_ARGUMENT'));
      await assert.rejects(ctx.join({ timout: 5 } as never), isCoded(InvalidArgumentError, 'ERR_TP_INVALID_ARGUMENT'));
      assert.equal(await ctx.join(60_000), true, "a number is the timeout, as torch's join(timeout)");
    } finally {
      await reap(ctx);
    }
  });
});

/** Asserts that `e` is the coded error of a child that could not load its target, and names that child. */
function fromChild(e: unknown, cls: Function, code: string, ctx?: ProcessContext): Error {
  assert.ok(e instanceof cls, `expected ${cls.name}, got ${String(e)}`);
  const err = e as Error & { code: string; errorIndex: number; pid: number };
  assert.equal(err.code, code);
  assert.equal(typeof err.errorIndex, 'number');
  if (ctx) assert.equal(err.pid, ctx.pids()[err.errorIndex]);
  assert.match(err.message, new RegExp(`^Process ${err.errorIndex} \\(pid ${err.pid}\\) could not load its target: `));
  return err;
}

describe('a target the child cannot load is a coded error from that child (NOTE [Loading the target in the child])', () => {
  for (const startMethod of ['spawn', 'thread'] as const) {
    it(`${startMethod}: a module that does not exist, a package that cannot be resolved`, async () => {
      for (const module of ['/nonexistent/dir/target.js', './no-such-file.js', 'no-such-package-tensorproc']) {
        const ctx = startProcesses({ module }, { nprocs: 2, join: false, startMethod });
        try {
          assert.equal(ctx.pids().length, 2, 'the children started at once');
          const e = await ctx.join().then(
            () => assert.fail('join() should throw'),
            (x: unknown) => x,
          );
          const err = fromChild(e, TargetNotFoundError, 'ERR_TP_TARGET_NOT_FOUND', ctx);
          assert.match(err.message, /does not exist|cannot be resolved/);
          await assert.rejects(ctx.loaded, (x: unknown) => x instanceof TargetNotFoundError);
          await ctx.started; // they did start
          for (const p of ctx.processes) assert.equal(p.isAlive(), false);
        } finally {
          await reap(ctx);
        }
      }
    });

    it(`${startMethod}: a missing export, an export that is not a function, no default export`, async () => {
      for (const [target, text] of [
        [
          { module: MODULE, export: 'nope' },
          /no export 'nope'; it must be a function called as fn\(i, \.\.\.args\)\. Functions it exports: .*success/,
        ],
        [{ module: MODULE, export: 'notAFunction' }, /an export 'notAFunction' of type number/],
        [{ module: fileURLToPath(MODULE) }, /no export 'default'/],
      ] as const) {
        const ctx = startProcesses(target, { join: false, startMethod });
        try {
          const e = await ctx.join().then(
            () => assert.fail('join() should throw'),
            (x: unknown) => x,
          );
          const err = fromChild(e, TargetNotFunctionError, 'ERR_TP_TARGET_NOT_FUNCTION', ctx) as TargetNotFunctionError;
          assert.match(err.message, text);
          assert.ok(err instanceof TypeError);
          assert.equal(err.errorIndex, 0);
        } finally {
          await reap(ctx);
        }
      }
      // join: true rejects with the same
      await assert.rejects(
        startProcesses({ module: MODULE, export: 'nope' }, { startMethod }),
        isCoded(TargetNotFunctionError, 'ERR_TP_TARGET_NOT_FUNCTION'),
      );
    });

    it(`${startMethod}: a module that fails to load`, async () => {
      const bad = new URL('./fixtures/broken.js', import.meta.url);
      const e = await startProcesses({ module: bad }, { startMethod }).then(
        () => assert.fail('should throw'),
        (x: unknown) => x,
      );
      const err = fromChild(e, TargetLoadError, 'ERR_TP_TARGET_LOAD');
      assert.match(err.message, /broken on purpose/);
      assert.equal((err.cause as Error).message, 'broken on purpose', "the child's error, rebuilt");
    });
  }

  it('a child that cannot load its target gives back the references its tensor arguments took, under both strategies', async () => {
    // Each child decodes its arguments before it imports its target, and lets go of them at
    // its exit. (Siblings stopped by SIGTERM after the first failure are killed processes:
    // under file_descriptor what a killed process held is not given back, a known gap of
    // the sharing layer; here each child is left to fail on its own.)
    for (const strategy of ['file_descriptor', 'file_system'] as const) {
      setSharingStrategy(strategy);
      const t = full([4], 1, { shared: true });
      const ctx = spawn({ module: MODULE, export: 'nope' }, { args: [t], nprocs: 3, join: false });
      try {
        const seg = segmentOf(t);
        await assert.rejects(ctx.join({ gracePeriod: 60_000 }), isCoded(TargetNotFunctionError, 'ERR_TP_TARGET_NOT_FUNCTION'));
        assert.deepEqual(
          ctx.processes.map((p) => p.exitCode),
          [1, 1, 1],
        );
        assert.equal(seg.refcount(), 1, 'only this process holds it: the children let go of the three references');
      } finally {
        await reap(ctx);
        t.release();
        setSharingStrategy('file_descriptor');
      }
    }
  });

  it('a child whose target module starts processes at its top level is refused: SpawnInBootstrapError, not processes without end', () => {
    const out = execFileSync(process.execPath, [fileURLToPath(new URL('./fixtures/spawn-at-import.js', import.meta.url))], {
      encoding: 'utf8',
      timeout: 60_000,
    });
    const r = JSON.parse(out.trim().split('\n').pop()!);
    // The program's own spawn started one child; that child's import tried again and failed.
    assert.equal(r.name, ProcessRaisedException.name);
    assert.equal(r.causeName, SpawnInBootstrapError.name);
    assert.equal(r.causeCode, 'ERR_TP_SPAWN_IN_BOOTSTRAP');
    assert.match(r.message, /still importing its target module/);
  });

  it('the entry module as target, its main code guarded and not awaited at top level: it works', () => {
    const out = execFileSync(process.execPath, [fileURLToPath(new URL('./fixtures/self-target-guarded.js', import.meta.url))], {
      encoding: 'utf8',
      timeout: 60_000,
    });
    assert.deepEqual(JSON.parse(out.trim().split('\n').pop()!), { set: true });
  });
});

describe('arguments', () => {
  it('structured-clonable values round-trip through args.ts, as plain V8 serializer output', async () => {
    const args = [1, 'two', { three: [3n, new Date(0)] }, new Map([[1, new Set([2])]]), new Float32Array([1.5]), null, undefined];
    const { bytes, fds } = encodeArgs(args);
    assert.deepEqual(fds, []);
    assert.equal(bytes[0], PLAIN, 'no tensorproc object: the child needs no transport to decode');
    assert.deepEqual(await decodeArgs(bytes, fds, false, () => import('../../src/index.js')), args);
  });

  it("the descriptors of encoded arguments are spawn's own duplicates, closed by release()", () => {
    const t = full([4], 1, { shared: true });
    const segment = segmentOf(t);
    const encoded = encodeArgs([t]);
    try {
      assert.equal(encoded.fds.length, 1);
      assert.notEqual(encoded.fds[0], segment.fd, "not the segment's own descriptor, which a receiver may close at any time");
      assert.deepEqual(addon.fstat(encoded.fds[0]!).slice(1), addon.fstat(segment.fd!).slice(1), 'the same memfd');
    } finally {
      encoded.abandon();
      encoded.release();
      encoded.release(); // once only
    }
    assert.throws(
      () => addon.fstat(encoded.fds[0]!),
      (e: any) => e.code === 'EBADF',
    );
    t.release();
  });

  it('a queue passed to a target that never imports tensorproc still arrives', async () => {
    const q = new Queue<string>();
    try {
      await spawn({ module: new URL('./fixtures/no-import.js', import.meta.url) }, { args: [q] });
      assert.equal(await q.get(), 'hello from a module that imports nothing');
    } finally {
      q.close();
    }
  });
});

describe('exception classes', () => {
  it("take torch's constructor arguments and keep their fields", () => {
    const raised = new ProcessRaisedException('Oh no!', 1, 1);
    const exited = new ProcessExitedException('Oh no!', 1, 1, 1);
    const signalled = new ProcessExitedException('Oh no!', 2, 77, -9, 'SIGKILL');
    for (const e of [raised, exited, signalled]) {
      assert.ok(e instanceof ProcessException && e instanceof Error);
      assert.ok(isTensorprocError(e));
      assert.equal(e.message, 'Oh no!');
    }
    assert.equal(raised.code, 'ERR_TP_PROCESS_RAISED');
    assert.equal(raised.name, 'ProcessRaisedException');
    assert.equal(raised.errorIndex, 1);
    assert.equal(raised.pid, 1);
    assert.equal(exited.code, 'ERR_TP_PROCESS_EXITED');
    assert.equal(exited.exitCode, 1);
    assert.equal(exited.signalName, null);
    assert.deepEqual([signalled.errorIndex, signalled.pid, signalled.exitCode, signalled.signalName], [2, 77, -9, 'SIGKILL']);
    // The base class is torch's too (catch it to catch both); it has a code of its own.
    const base = new ProcessException('Oh no!', 0, 5);
    assert.deepEqual([base.name, base.code, base.errorIndex, base.pid], ['ProcessException', 'ERR_TP_PROCESS', 0, 5]);
    // torch checks that they pickle; ours survive structured cloning as data
    const copy = structuredClone({ ...signalled, message: signalled.message });
    assert.deepEqual(
      [copy.errorIndex, copy.pid, copy.exitCode, copy.signalName, copy.code],
      [2, 77, -9, 'SIGKILL', 'ERR_TP_PROCESS_EXITED'],
    );
  });
});
