// The worker set (NOTE [Worker set]) under both start methods: parallel start with per-worker
// arguments, an inbox per worker, messages delivered before the exit that follows them,
// death notices, replacement, the graceful stop's escalation, and a parent that exits by
// itself once it lets go of its workers.
import { describe, it, after } from 'node:test';
import assert from 'node:assert/strict';
import { checkLeaks } from '../helpers/leaks.js';
import { running } from '../helpers/procs.js';
import { fixture, startPeer } from '../helpers/child.js';
import { isCoded } from '../helpers/errors.js';
import { WorkerSet, type WorkerExit } from '../../src/workers/worker-set.js';
import { ProcessExitedException, ProcessRaisedException, type StartMethod } from '../../src/index.js';

// Every set a test opened is stopped at the end, whatever happened (before the leak check).
const sets = new Set<WorkerSet>();
after(async () => {
  await Promise.all([...sets].map((s) => s.terminate({ grace: 100 })));
});
checkLeaks();

const MAIN = { module: new URL('./fixtures/set-worker.js', import.meta.url), export: 'main' };
const TIMEOUT = { timeout: 60_000 };

type Event = { kind: 'message'; id: number; m: any } | { kind: 'exit'; id: number; exit: WorkerExit };

/** A set whose messages and exits are read in order with next(). */
function open(size: number, startMethod: StartMethod) {
  const events: Event[] = [];
  const waiters: ((e: Event) => void)[] = [];
  const push = (e: Event): void => {
    const w = waiters.shift();
    if (w) w(e);
    else events.push(e);
  };
  const set = new WorkerSet({
    main: MAIN,
    size,
    startMethod,
    args: (id) => [`seed-${id}`],
    onMessage: (id, m) => push({ kind: 'message', id, m }),
    onExit: (id, exit) => push({ kind: 'exit', id, exit }),
  });
  set.keepAlive(true);
  sets.add(set);
  const next = (): Promise<Event> => (events.length ? Promise.resolve(events.shift()!) : new Promise((r) => waiters.push(r)));
  /** The hellos of `n` workers, by id. */
  const hellos = async (n: number): Promise<Map<number, any>> => {
    const out = new Map<number, any>();
    while (out.size < n) {
      const e = await next();
      assert.equal(e.kind, 'message');
      out.set(e.id, (e as { m: any }).m);
    }
    return out;
  };
  return { set, next, hellos };
}

const methods: StartMethod[] = ['spawn', 'thread'];
for (const startMethod of methods) {
  describe(`worker set, startMethod '${startMethod}'`, () => {
    it('starts every worker with its own start arguments, and each inbox reaches only its worker, in order', TIMEOUT, async () => {
      const { set, next, hellos } = open(3, startMethod);
      const hello = await hellos(3);
      for (let id = 0; id < 3; id++) {
        assert.deepEqual(hello.get(id)!.args, [`seed-${id}`]);
        if (startMethod === 'spawn') assert.equal(set.pid(id), hello.get(id)!.pid);
        else assert.equal(typeof set.pid(id), 'number');
      }
      if (startMethod === 'spawn') assert.equal(new Set([...hello.values()].map((h) => h.pid)).size, 3);
      for (let k = 0; k < 200; k++) assert.ok(set.send(1, { op: 'echo', value: k }));
      assert.ok(set.send(2, { op: 'echo', value: 'two' }));
      const fromOne: number[] = [];
      let fromTwo: unknown = null;
      while (fromOne.length < 200 || fromTwo === null) {
        const e = await next();
        assert.equal(e.kind, 'message');
        const m = (e as { m: any }).m;
        assert.equal(m.from, e.id);
        if (e.id === 1) fromOne.push(m.echo);
        else fromTwo = m.echo;
      }
      assert.deepEqual(
        fromOne,
        Array.from({ length: 200 }, (_, k) => k),
      );
      assert.equal(fromTwo, 'two');
      await set.stop();
      for (let id = 0; id < 3; id++) assert.equal(set.isAlive(id), false);
    });

    it('reports an exit after every message sent before it, with its code; the id then has no worker', TIMEOUT, async () => {
      const { set, next, hellos } = open(2, startMethod);
      await hellos(2);
      set.send(0, { op: 'say-then-exit', code: 3 });
      const bye = await next();
      assert.equal(bye.kind, 'message');
      assert.deepEqual((bye as { m: any }).m, { from: 0, bye: true });
      const exit = await next();
      assert.equal(exit.kind, 'exit');
      assert.equal(exit.id, 0);
      const x = (exit as { exit: WorkerExit }).exit;
      assert.equal(x.exitCode, 3);
      assert.equal(x.signalName, null);
      isCoded(ProcessExitedException, 'ERR_TP_PROCESS_EXITED')(x.error);
      assert.equal((x.error as ProcessExitedException).errorIndex, 0);
      assert.match(x.error!.message, /process 0 terminated with exit code 3/);
      assert.equal(set.isAlive(0), false);
      assert.equal(set.send(0, { op: 'echo', value: 1 }), false);
      // The other worker goes on.
      set.send(1, { op: 'echo', value: 'still here' });
      assert.deepEqual(((await next()) as { m: any }).m, { from: 1, echo: 'still here' });
      await set.stop();
    });

    it('reports a worker that throws with its stack, named by its id', TIMEOUT, async () => {
      const { set, next, hellos } = open(2, startMethod);
      await hellos(2);
      set.send(1, { op: 'throw', message: 'worker one gives up' });
      const exit = await next();
      assert.equal(exit.kind, 'exit');
      assert.equal(exit.id, 1);
      const x = (exit as { exit: WorkerExit }).exit;
      assert.equal(x.exitCode, 1);
      isCoded(ProcessRaisedException, 'ERR_TP_PROCESS_RAISED')(x.error);
      assert.equal((x.error as ProcessRaisedException).errorIndex, 1);
      assert.match(x.error!.message, /-- Process 1 terminated with the following error:\nError: worker one gives up\n\s+at /);
      await set.stop();
    });

    it('reports a killed worker with its signal, and replace() gives the id a new worker', TIMEOUT, async () => {
      const { set, next, hellos } = open(2, startMethod);
      const first = await hellos(2);
      set.kill(0, 'SIGKILL');
      const exit = await next();
      assert.equal(exit.kind, 'exit');
      const x = (exit as { exit: WorkerExit }).exit;
      assert.equal(x.signalName, 'SIGKILL');
      assert.equal(x.exitCode, -9);
      isCoded(ProcessExitedException, 'ERR_TP_PROCESS_EXITED')(x.error);
      assert.match(x.error!.message, /process 0 terminated with signal SIGKILL/);
      if (startMethod === 'spawn') assert.equal(running(first.get(0)!.pid), false);
      set.replace(0);
      const again = await hellos(1);
      assert.deepEqual(again.get(0)!.args, ['seed-0']);
      if (startMethod === 'spawn') assert.notEqual(again.get(0)!.pid, first.get(0)!.pid);
      set.send(0, { op: 'echo', value: 'new' });
      assert.deepEqual(((await next()) as { m: any }).m, { from: 0, echo: 'new' });
      await set.stop();
    });

    it('replace() of a running worker retires it: nothing of it is reported, and it is gone once stop() resolves', TIMEOUT, async () => {
      const { set, next, hellos } = open(1, startMethod);
      const first = await hellos(1);
      set.send(0, { op: 'linger' }); // it will not stop when asked: retiring must escalate
      assert.deepEqual(((await next()) as { m: any }).m, { from: 0, lingering: true });
      set.replace(0, { grace: 50 });
      const again = await hellos(1);
      if (startMethod === 'spawn') assert.notEqual(again.get(0)!.pid, first.get(0)!.pid);
      await set.stop();
      if (startMethod === 'spawn') assert.equal(running(first.get(0)!.pid), false);
      // Nothing was reported of the retired worker, nor of those stop() stopped.
      const late = await Promise.race([next(), new Promise((r) => setImmediate(r, 'none'))]);
      assert.equal(late, 'none');
    });

    it('stop() asks, then escalates to SIGTERM and SIGKILL for workers that do not stop', TIMEOUT, async () => {
      const size = startMethod === 'spawn' ? 3 : 2; // a thread cannot ignore its SIGTERM
      const { set, next, hellos } = open(size, startMethod);
      const hello = await hellos(size);
      set.send(1, { op: 'linger' });
      if (size === 3) set.send(2, { op: 'ignore-sigterm' });
      const heard = new Set<number>();
      for (let k = 1; k < size; k++) heard.add(((await next()) as { m: any }).m.from);
      assert.deepEqual([...heard].sort(), size === 3 ? [1, 2] : [1]);
      await set.stop({ grace: 50 });
      for (let id = 0; id < size; id++) {
        assert.equal(set.isAlive(id), false);
        if (startMethod === 'spawn') assert.equal(running(hello.get(id)!.pid), false);
      }
    });

    it('a parent that lets go of its workers (keepAlive(false)) exits by itself, and they die with it', TIMEOUT, async () => {
      const peer = startPeer(fixture(import.meta.url, 'set-parent.js'), [startMethod]);
      const { pids } = await peer.next();
      assert.equal(pids.length, 2);
      assert.deepEqual(await peer.exited, { code: 0, signal: null });
      if (startMethod === 'spawn') {
        // PR_SET_PDEATHSIG kills them with the parent; reaped by init, which takes a moment.
        const { waitFor } = await import('../helpers/wait.js');
        await waitFor(() => pids.every((p: number) => !running(p)));
      }
    });
  });
}
