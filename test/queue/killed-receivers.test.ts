// A consumer SIGKILLed at a random point of its receive path leaves its producer nothing
// busy for good (NOTE [Orphans in flight]): the storm of issue 25. The parent produces
// fresh shared tensors, one per message, and releases each after its put; a child gets and
// keeps them and is killed a random time after its first message; the parent drains the
// rest, checks that every message arrived once (the one in the consumer's hands excepted),
// and starts a fresh consumer. After the trials and one housekeeping pass, no segment of the
// parent may be busy, and its descriptors and mappings are back where they started. Then the
// worst point of that path for certain, once per strategy (a datagram taken, nothing decoded).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as mp from '../../src/index.js';
import { receiveCache, segmentCache, mappedSegments } from '../../src/sharing/index.js';
import { holders } from '../../src/sharing/segment-header.js';
import { checkLeaks, openFds, shmSegments } from '../helpers/leaks.js';
import { reap } from '../helpers/procs.js';
import { Prng } from '../faults/prng.js';
import type { StormMessage } from './fixtures/storm-targets.js';

checkLeaks();

const targets = new URL('./fixtures/storm-targets.js', import.meta.url);
// file_descriptor: 20 trials a size, the storm of issue 25. file_system: its fix (NOTE
// [Witnesses of named segments]) is checked for certain by the deterministic test below, so
// its storms run fewer trials by default (CI time); TP_STORM_TRIALS=20 runs the count.
const TRIALS = { file_descriptor: 20, file_system: Number(process.env.TP_STORM_TRIALS ?? 5) };
/** Housekeeping passes to drive at most: reclaim and probe, then the second look that settles. */
const PASSES = 4;
const SEED = Number(process.env.TP_STORM_SEED ?? Date.now() % 2 ** 31);

/** Gets what is left in `q` once everything this process put has gone into it. */
async function drain(q: mp.Queue<StormMessage>, marks: Int32Array): Promise<void> {
  let flushed = false;
  void q.joinThread().then(() => {
    flushed = true;
  });
  for (;;) {
    const wasFlushed = flushed; // read before the get: an empty queue after a flush is final
    try {
      const m = await q.getNowait();
      marks[m.seq] = marks[m.seq]! + 1;
      m.t.release();
      continue;
    } catch (e) {
      if ((e as { code?: string }).code !== 'ERR_TP_QUEUE_EMPTY') throw e;
    }
    if (wasFlushed) return;
    await new Promise((r) => setImmediate(r));
  }
}

for (const strategy of ['file_descriptor', 'file_system'] as const) {
  for (const [label, elements, perTrial, maxDelay] of [
    ['4 MiB', 1 << 20, 24, 150],
    ['1 KiB', 256, 300, 60],
  ] as const) {
    test(`${strategy}, ${label}: ${TRIALS[strategy]} consumers killed mid-stream leave no segment busy`, async (t) => {
      mp.setSharingStrategy(strategy);
      const seed = SEED + (strategy === 'file_system' ? 1 : 0) + (elements === 256 ? 2 : 0);
      t.diagnostic(`seed ${seed} (replay: TP_STORM_SEED=${SEED})`);
      const r = new Prng(seed);
      const q = new mp.Queue<StormMessage>();
      const flowing = new mp.Event();
      mp.emptyCache();
      const start = { fds: openFds().size, mappings: mappedSegments() };
      let lostTotal = 0;
      try {
        for (let trial = 0; trial < TRIALS[strategy]; trial++) {
          const seen = mp.zeros([perTrial], { dtype: 'int32', shared: true });
          const marks = seen.data as Int32Array;
          flowing.clear();
          let sent = 0;
          const ctx = mp.spawn({ module: targets, export: 'keepAll' }, { args: [q, seen, flowing, strategy], join: false });
          try {
            const delay = r.int(0, maxDelay);
            let killed = false;
            const kill = flowing.wait().then(
              () =>
                new Promise<void>((resolve) => {
                  setTimeout(() => {
                    killed = true;
                    process.kill(ctx.pids()[0]!, 'SIGKILL');
                    resolve();
                  }, delay);
                }),
            );
            for (let seq = 0; seq < perTrial && !killed; seq++) {
              const x = mp.empty([elements], { dtype: 'int32', shared: true }).fill(seq);
              await q.put({ seq, t: x });
              x.release();
              sent++;
              await new Promise((res) => setImmediate(res));
            }
            await kill;
            await assert.rejects(ctx.join(), { code: 'ERR_TP_PROCESS_EXITED', signalName: 'SIGKILL' });
          } finally {
            await reap(ctx);
          }
          await drain(q, marks);
          let lost = 0;
          for (let k = 0; k < perTrial; k++) {
            assert.ok(marks[k]! <= 1, `trial ${trial} (seed ${seed}): message ${k} arrived ${marks[k]} times`);
            if (k < sent && marks[k] === 0) lost++;
          }
          // The one the consumer had taken and not yet counted when it died may be lost.
          assert.ok(lost <= 1, `trial ${trial} (seed ${seed}): ${lost} messages of ${sent} reached nobody`);
          lostTotal += lost;
          seen.release();
        }
        // Housekeeping takes back what the dead consumers held and settles what they took
        // in flight: nothing of this process stays busy.
        // Parked mappings of our own segments (drained here) keep what they were sent with open
        // until they decay (NOTE [Cache decay]): that decay, now.
        receiveCache.clear();
        for (let i = 0; i < PASSES && segmentCache.busySegments().length > 0; i++) segmentCache.housekeeping();
        const busy = segmentCache.busySegments().map((s) => `total ${s.refcount()}, slots ${JSON.stringify(holders(s.header))}`);
        t.diagnostic(`messages lost in the consumers' hands: ${lostTotal}; segments busy after housekeeping: ${busy.length}`);
        assert.equal(busy.length, 0, `seed ${seed}: segments busy with nothing alive to hold them: ${busy.join('; ')}`);
        mp.emptyCache();
        const end = { fds: openFds().size, mappings: mappedSegments() };
        // The figures issue 25 is judged by, per strategy and size (a duplicate fails above).
        t.diagnostic(
          `trials ${TRIALS[strategy]}, duplicated 0, descriptors ${start.fds} -> ${end.fds}, mappings ${start.mappings} -> ${end.mappings}`,
        );
        assert.deepEqual(end, start);
      } finally {
        q.close();
        flowing.close();
        mp.emptyCache();
      }
    });
  }
}

// The worst point for certain, once per strategy: a consumer takes the datagram off the socket
// and dies before it decodes anything (so before any slot records the reference). Without NOTE
// [Orphans in flight] / [Witnesses of named segments] the segment stays busy here for a minute.
for (const strategy of ['file_descriptor', 'file_system'] as const) {
  test(`${strategy}: a consumer killed holding a datagram it took leaves its segment to the producer`, async () => {
    mp.setSharingStrategy(strategy);
    mp.emptyCache();
    const start = { fds: openFds().size, mappings: mappedSegments(), shm: shmSegments().length };
    const q = new mp.Queue<mp.Tensor>();
    try {
      const x = mp.full([1 << 16], 7, { dtype: 'int32', shared: true }); // 256 KiB: a segment of its own, not a piece;
      await q.put(x);
      await q.joinThread(); // in the socket, not in this process's backlog
      x.release();
      const ctx = mp.spawn({ module: targets, export: 'takeAndDie' }, { args: [q], join: false });
      try {
        await assert.rejects(ctx.join(), { code: 'ERR_TP_PROCESS_EXITED', signalName: 'SIGKILL' });
      } finally {
        await reap(ctx);
      }
      const [seg] = segmentCache.busySegments();
      assert.ok(seg !== undefined, 'the segment is busy while the dead consumer is not accounted for');
      assert.equal(seg.refcount(), 2, 'this cache and the message the consumer took');
      for (let i = 0; i < PASSES && segmentCache.busySegments().length > 0; i++) segmentCache.housekeeping();
      assert.deepEqual(
        segmentCache.busySegments(),
        [],
        `still busy: total ${seg.refcount()}, slots ${JSON.stringify(holders(seg.header))}`,
      );
      assert.equal(seg.refcount(), 1);
    } finally {
      q.close();
      mp.emptyCache();
    }
    assert.deepEqual({ fds: openFds().size, mappings: mappedSegments(), shm: shmSegments().length }, start);
  });
}
