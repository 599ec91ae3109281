// Bad input to spawn()/startProcesses() is a coded error before any child starts; the
// exception classes take torch's constructor arguments and keep their fields.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { checkLeaks } from '../helpers/leaks.js';
import {
  spawn,
  startProcesses,
  ProcessContext,
  InvalidArgumentError,
  NotTransferableError,
  SpawnInBootstrapError,
  TargetIsEntryError,
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

checkLeaks();

const MODULE = new URL('./fixtures/targets.js', import.meta.url);
const ok = { module: MODULE, export: 'success' };

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

describe('bad input is a coded error before any process starts', () => {
  it('a module that does not exist', async () => {
    const e = await rejectsCoded(spawn({ module: '/nonexistent/dir/target.js' }), TargetNotFoundError, 'ERR_TP_TARGET_NOT_FOUND');
    assert.match(e.message, /does not exist/);
    await rejectsCoded(spawn({ module: './no-such-file.js' }), TargetNotFoundError, 'ERR_TP_TARGET_NOT_FOUND');
    await rejectsCoded(spawn({ module: 'no-such-package-tensorproc' }), TargetNotFoundError, 'ERR_TP_TARGET_NOT_FOUND');
  });

  it('a bad target gives back the references its tensor arguments took, under both strategies', async () => {
    for (const strategy of ['file_descriptor', 'file_system'] as const) {
      setSharingStrategy(strategy);
      try {
        const t = full([4], 1, { shared: true });
        const seg = segmentOf(t);
        await rejectsCoded(spawn({ module: MODULE, export: 'nope' }, { args: [t], nprocs: 3 }), TargetNotFunctionError, 'ERR_TP_TARGET_NOT_FUNCTION');
        assert.equal(seg.refcount(), 1, 'only this process holds it: no child took the three references');
        t.release();
      } finally {
        setSharingStrategy('file_descriptor');
      }
    }
  });

  it('a module that fails to load', async () => {
    const bad = new URL('./fixtures/broken.js', import.meta.url);
    const e = await rejectsCoded(spawn({ module: bad }), TargetLoadError, 'ERR_TP_TARGET_LOAD');
    assert.match(e.message, /broken on purpose/);
  });

  it("the entry module as target from its own top-level await: TargetIsEntryError, not a hang", () => {
    // Run as a program of its own: the check is about process.argv[1].
    const out = execFileSync(process.execPath, [fileURLToPath(new URL('./fixtures/self-target.js', import.meta.url))], { encoding: 'utf8', timeout: 60_000 });
    const r = JSON.parse(out.trim().split('\n').pop()!);
    assert.equal(r.name, TargetIsEntryError.name);
    assert.equal(r.code, 'ERR_TP_TARGET_IS_ENTRY');
    assert.match(r.message, /still running its top-level code/);
  });

  it('a child whose target module starts processes at its top level is refused: SpawnInBootstrapError, not processes without end', () => {
    const out = execFileSync(process.execPath, [fileURLToPath(new URL('./fixtures/spawn-at-import.js', import.meta.url))], { encoding: 'utf8', timeout: 60_000 });
    const r = JSON.parse(out.trim().split('\n').pop()!);
    // The program's own spawn started one child; that child's import tried again and failed.
    assert.equal(r.name, ProcessRaisedException.name);
    assert.equal(r.causeName, SpawnInBootstrapError.name);
    assert.equal(r.causeCode, 'ERR_TP_SPAWN_IN_BOOTSTRAP');
    assert.match(r.message, /still importing its target module/);
  });

  it('the entry module as target, its main code guarded as in torch programs: it works', () => {
    const out = execFileSync(process.execPath, [fileURLToPath(new URL('./fixtures/self-target-guarded.js', import.meta.url))], { encoding: 'utf8', timeout: 60_000 });
    assert.deepEqual(JSON.parse(out.trim().split('\n').pop()!), { set: true });
  });

  it('a missing export, and an export that is not a function', async () => {
    const e = await rejectsCoded(spawn({ module: MODULE, export: 'nope' }), TargetNotFunctionError, 'ERR_TP_TARGET_NOT_FUNCTION');
    assert.match(e.message, /no export 'nope'/);
    assert.ok(e instanceof TypeError);
    await rejectsCoded(spawn({ module: MODULE, export: 'notAFunction' }), TargetNotFunctionError, 'ERR_TP_TARGET_NOT_FUNCTION');
    // no default export
    await rejectsCoded(spawn({ module: fileURLToPath(MODULE) }), TargetNotFunctionError, 'ERR_TP_TARGET_NOT_FUNCTION');
  });

  it('a target that is not { module, export }', async () => {
    await rejectsCoded(spawn(null as never), InvalidArgumentError, 'ERR_TP_INVALID_ARGUMENT');
    await rejectsCoded(spawn((() => {}) as never), InvalidArgumentError, 'ERR_TP_INVALID_ARGUMENT');
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

  it('join: false returns the context at once; a bad target rejects started and join()', async () => {
    const ctx = spawn({ module: '/nonexistent/dir/target.js' }, { join: false });
    assert.ok(ctx instanceof ProcessContext);
    assert.deepEqual(ctx.pids(), []);
    await rejectsCoded(ctx.started, TargetNotFoundError, 'ERR_TP_TARGET_NOT_FOUND');
    await rejectsCoded(ctx.join(), TargetNotFoundError, 'ERR_TP_TARGET_NOT_FOUND');
    assert.deepEqual(ctx.pids(), [], 'no child was started');
    // checks that need no import throw at once
    assert.throws(() => spawn(ok, { nprocs: 0, join: false }), (e: any) => e.code === 'ERR_TP_INVALID_ARGUMENT');
  });

  it('join() options are checked', async () => {
    const ctx = spawn(ok, { join: false });
    await ctx.started;
    await assert.rejects(ctx.join({ timeout: -1 }), { code: 'ERR_TP_INVALID_ARGUMENT' });
    await assert.rejects(ctx.join({ gracePeriod: 'x' as never }), { code: 'ERR_TP_INVALID_ARGUMENT' });
    assert.equal(await ctx.join(), true);
  });
});

describe('arguments', () => {
  it('structured-clonable values round-trip through args.ts, as plain V8 serializer output', async () => {
    const args = [1, 'two', { three: [3n, new Date(0)] }, new Map([[1, new Set([2])]]), new Float32Array([1.5]), null, undefined];
    const { bytes, fds } = encodeArgs(args);
    assert.deepEqual(fds, []);
    assert.equal(bytes[0], PLAIN, 'no tensorproc object: the child needs no transport to decode');
    assert.deepEqual(await decodeArgs(bytes, fds), args);
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
    assert.throws(() => addon.fstat(encoded.fds[0]!), (e: any) => e.code === 'EBADF');
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
    assert.deepEqual([copy.errorIndex, copy.pid, copy.exitCode, copy.signalName, copy.code], [2, 77, -9, 'SIGKILL', 'ERR_TP_PROCESS_EXITED']);
  });
});
