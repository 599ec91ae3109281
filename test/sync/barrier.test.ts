// Barrier: arrival indices, the action, abort/reset/timeout breaking it, 4 parties over 1,000
// rounds across processes, and a party killed before the barrier breaking it for the others.
import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import * as mp from '../../src/index.js';
import { settleBeforeLeakCheck } from './settle.js';
import { checkLeaks } from '../helpers/leaks.js';
import { isCoded, throwsCoded } from '../helpers/errors.js';
import { reap } from '../helpers/procs.js';

settleBeforeLeakCheck();
checkLeaks();

const targets = new URL('./fixtures/targets.js', import.meta.url);
const target = (name: string) => ({ module: targets, export: name });
const broken = isCoded(mp.BrokenBarrierError, 'ERR_TP_BROKEN_BARRIER');

describe('Barrier in one process', () => {
  test('arrival indices 0 .. parties - 1, the action once per round before anyone goes on', async () => {
    let actions = 0;
    const b = new mp.Barrier(3, { action: () => void actions++ });
    assert.equal(b.parties, 3);
    for (let round = 1; round <= 3; round++) {
      const indices = await Promise.all([0, 1, 2].map(() => b.wait().then((i) => ({ i, actions }))));
      assert.deepEqual(indices.map((x) => x.i).sort(), [0, 1, 2]);
      assert.ok(
        indices.every((x) => x.actions === round),
        'the action ran before every party was released',
      );
    }
    assert.equal(b.nWaiting, 0);
    assert.equal(b.broken, false);
  });

  test('abort() breaks it for waiters and later parties until reset()', async () => {
    const b = new mp.Barrier(2);
    const waiting = b.wait();
    assert.equal(b.nWaiting, 1);
    b.abort();
    await assert.rejects(waiting, broken);
    await assert.rejects(b.wait(), broken);
    assert.equal(b.broken, true);
    b.reset();
    assert.equal(b.broken, false);
    assert.deepEqual((await Promise.all([b.wait(), b.wait()])).sort(), [0, 1]);
  });

  test('reset() while a party waits gives it BrokenBarrierError; a timed-out wait breaks the barrier', async () => {
    const b = new mp.Barrier(2);
    const waiting = b.wait();
    b.reset();
    await assert.rejects(waiting, broken);
    assert.equal(b.broken, false);
    await assert.rejects(b.wait(20), broken);
    assert.equal(b.broken, true);
    b.reset();
    const t = new mp.Barrier(2, { timeout: 20 });
    await assert.rejects(t.wait(), broken, "the barrier's default timeout");
  });

  test('an action that throws breaks the barrier; the last party gets its error', async () => {
    const b = new mp.Barrier(2, {
      action: () => {
        throw new Error('boom');
      },
    });
    const first = b.wait();
    await assert.rejects(b.wait(), /boom/);
    await assert.rejects(first, broken);
  });

  test('bad input is coded', async () => {
    for (const bad of [0, -1, 1.5, '4', 2 ** 21])
      throwsCoded(() => new mp.Barrier(bad as number), mp.InvalidCountError, 'ERR_TP_INVALID_COUNT');
    throwsCoded(() => new mp.Barrier(2, { timeout: -1 }), mp.InvalidArgumentError, 'ERR_TP_INVALID_ARGUMENT');
    throwsCoded(() => new mp.Barrier(2, { timeout: 'soon' as never }), mp.InvalidArgumentError, 'ERR_TP_INVALID_ARGUMENT');
    const b = new mp.Barrier(2);
    for (const bad of ['soon', NaN, -1])
      await assert.rejects(b.wait(bad as number), isCoded(mp.InvalidArgumentError, 'ERR_TP_INVALID_ARGUMENT'));
    assert.equal(b.nWaiting, 0, 'a refused wait does not arrive');
    assert.equal(b.broken, false);
    throwsCoded(() => new mp.Barrier(2, { action: 5 as never }), mp.InvalidArgumentError, 'ERR_TP_INVALID_ARGUMENT');
    throwsCoded(() => new mp.Barrier(2, { action: { module: './relative.js' } }), mp.InvalidArgumentError, 'ERR_TP_INVALID_ARGUMENT');
  });

  test('a barrier whose action is a function cannot travel', async () => {
    const b = new mp.Barrier(2, { action: () => {} });
    const q = new mp.Queue();
    await assert.rejects(q.put(b), isCoded(mp.NotTransferableError, 'ERR_TP_NOT_TRANSFERABLE'));
    q.close();
  });
});

describe('Barrier across processes', () => {
  test('4 process children over 1,000 rounds: each round releases all four, with indices 0..3', async () => {
    const parties = 4;
    const rounds = 1000;
    const b = new mp.Barrier(parties);
    const record = mp.full([parties, rounds], -1, { dtype: 'int32', shared: true });
    const arrived = mp.Array('i', parties);
    await mp.spawn(target('barrierRounds'), { args: [b, record, arrived, rounds], nprocs: parties });
    const rows = record.toArray() as number[][];
    for (let r = 0; r < rounds; r++) {
      assert.deepEqual(rows.map((row) => row[r]).sort(), [0, 1, 2, 3], `round ${r}`);
    }
    assert.equal(b.broken, false);
    record.release();
  });

  test('thread children: the action runs in the last party, imported there', async () => {
    const b = new mp.Barrier(3, { action: { module: targets, export: 'onRound' } });
    const record = mp.full([3, 50], -1, { dtype: 'int32', shared: true });
    const arrived = mp.Array('i', 3);
    const actions = mp.Value('i', 0);
    await mp.startProcesses(target('barrierRounds'), { args: [b, record, arrived, 50, actions], nprocs: 3, startMethod: 'thread' });
    assert.equal(actions.value, 50, 'once per round');
    assert.equal(b.broken, false);
    record.release();
  });

  test('a party SIGKILLed before it reaches the barrier breaks it for the others', async () => {
    const b = new mp.Barrier(3);
    const ready = new mp.Event();
    const out = new mp.Queue<string | number>();
    const victim = mp.startProcesses(target('readyThenHang'), { args: [b, ready], join: false });
    const other = mp.startProcesses(target('waitAndReport'), { args: [b, out], join: false });
    try {
      assert.equal(await ready.wait(20_000), true);
      const here = b.wait();
      victim.processes[0]!.kill('SIGKILL');
      await assert.rejects(here, broken);
      assert.equal(await out.get(), 'ERR_TP_BROKEN_BARRIER');
      assert.equal(await other.join(), true);
      assert.equal(b.broken, true);
    } finally {
      await reap(victim);
      await reap(other);
      ready.close();
      out.close();
    }
  });
});
