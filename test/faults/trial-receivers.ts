// The kill-receivers trials of the fault campaign (NOTE [Fault trials] in plan.ts, issue 25):
// consumers SIGKILLed at random points of their receive path, then the references they held
// or took in flight counted in this producer's segments after housekeeping.
import * as mp from '../../src/index.js';
import { receiveCache, segmentCache } from '../../src/sharing/index.js';
import { holders } from '../../src/sharing/segment-header.js';
import { Prng } from './prng.js';
import { get, put, type Channel, type Message } from './targets.js';
import { elementsOf, joinKilled, makeChannel, target, type Trial } from './trial-kit.js';

const ROUNDS = 4;

/**
 * What is left on the channel, up to the end marker this process sent after the kill: a put
 * may wait in this process's backlog (NOTE [Sending without blocking]), and messages of one
 * sender arrive in order.
 */
async function drain(ch: Channel, marks: Int32Array): Promise<number> {
  let n = 0;
  for (;;) {
    const { seq, t } = (await get(ch)) as Message;
    if (seq < 0) return n;
    marks[seq] = marks[seq]! + 1;
    t.release();
    n++;
  }
}

export async function killReceivers(t: Trial): Promise<void> {
  const p = t.p;
  const r = new Prng(p.seed ^ 0x1b873593);
  const ch = makeChannel(p);
  const perRound = p.count;
  let lost = 0;
  for (let round = 0; round < ROUNDS; round++) {
    const seen = mp.zeros([perRound], { dtype: 'int32', shared: true });
    const marks = seen.data as Int32Array;
    const flowing = new mp.Event();
    const delay = r.int(0, p.delayMs);
    const ctx = mp.spawn(target('keepUntilKilled'), { args: [ch.consumerEnd, flowing, seen], join: false });
    t.phase(`round ${round}: kill ${delay} ms after the first message`, { consumer: ctx.pids() });
    let killed = false;
    const kill = flowing.wait(20_000).then(async (ok) => {
      if (!ok) t.fail('no-flow', `round ${round}: no message arrived within 20 s`);
      await new Promise((res) => setTimeout(res, delay));
      killed = true;
      process.kill(ctx.pids()[0]!, 'SIGKILL');
    });
    let sent = 0;
    for (let seq = 0; seq < perRound && !killed; seq++) {
      const x = mp.empty([elementsOf(p)], { dtype: 'int32', shared: true }).fill(seq);
      await put(ch.producerEnd, { seq, t: x });
      x.release();
      sent++;
      await new Promise((res) => setImmediate(res));
    }
    await kill;
    await joinKilled(t, ctx, `consumer ${round}`);
    await put(ch.producerEnd, { seq: -1, t: null });
    await drain(ch.consumerEnd, marks);
    let missing = 0;
    for (let k = 0; k < perRound; k++) {
      if (marks[k]! > 1) t.fail('duplicate', `round ${round}: message ${k} arrived ${marks[k]} times`);
      if (k < sent && marks[k] === 0) missing++;
    }
    // The one the consumer had taken and not yet counted when it died may be lost.
    if (missing > 1) t.fail('lost', `round ${round}: ${missing} of ${sent} messages reached nobody`);
    lost += missing;
    seen.release();
    flowing.close();
  }
  ch.close();
  t.stats.lost = lost;
  // Every consumer is dead and everything left was drained and released: after the passes of
  // housekeeping that take back what dead holders held and what lost messages carried (NOTE
  // [Orphans in flight]: a probe, then a second look), no segment of ours may stay busy.
  // Parked mappings of our own segments (drained here) keep what they were sent with open
  // until they decay (NOTE [Cache decay]): that decay, now.
  receiveCache.clear();
  for (let i = 0; i < 4 && segmentCache.busySegments().length > 0; i++) segmentCache.housekeeping();
  const busy = segmentCache.busySegments();
  t.stats.orphaned = busy.length;
  if (busy.length > 0) {
    const shown = busy.slice(0, 3).map((s) => `total ${s.refcount()}, slots ${JSON.stringify(holders(s.header))}`);
    t.fail('orphaned', `${busy.length} segments still busy with no holder to account for them: ${shown.join('; ')}`);
  }
}
