// The resource trials of the fault campaign (NOTE [Fault trials] in plan.ts): 40 consumers
// killed holding tensors, a producer under a low open-file limit, a full /dev/shm.
import { execFileSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import * as mp from '../../src/index.js';
import { segmentMemory } from '../helpers/segments.js';
import { waitFor } from '../helpers/wait.js';
import { Prng } from './prng.js';
import { checkMessage, get, put, stamp } from './targets.js';
import { elementsOf, joinClean, joinKilled, makeChannel, target, type Trial } from './trial-kit.js';

function usage(): { fds: number; mapped: number; resident: number; names: number } {
  const m = segmentMemory();
  return {
    fds: readdirSync('/proc/self/fd').length,
    mapped: m.mapped,
    resident: m.resident,
    names: readdirSync('/dev/shm').filter((n) => n.startsWith('tensorproc_')).length,
  };
}

/** 40 consumers SIGKILLed holding (or taking) tensors: this producer's descriptors and memory come back within 1%. */
export async function holders40(t: Trial): Promise<void> {
  const p = t.p;
  const r = new Prng(p.seed ^ 0x5bd1e995);
  // One channel for all 40, as a pipeline has: what a killed consumer had not taken yet is
  // the next one's (closing a channel with messages in it loses them, and what they carry is
  // let go of only after a minute: NOTE [Dead holders]).
  const ch = makeChannel(p);
  mp.emptyCache();
  const start = usage();
  for (let round = 0; round < 40; round++) {
    const n = r.int(1, p.hold);
    const whenHeld = r.next() < 0.6;
    const delay = r.int(0, 40);
    const ready = new mp.Event();
    const ctx = mp.spawn(target('holdUntilKilled'), { args: [ch.consumerEnd, ready, n], join: false });
    t.phase(`round ${round}: ${n} tensors, kill ${whenHeld ? 'once held' : `${delay} ms after the puts`}`, { consumer: ctx.pids() });
    for (let k = 0; k < n; k++) {
      const x = mp.empty([elementsOf(p)], { dtype: 'int32', shared: true }).fill(k);
      await put(ch.producerEnd, x);
      x.release();
    }
    if (whenHeld) {
      if (!(await ready.wait(20_000))) t.fail('no-flow', `round ${round}: the consumer never held its ${n} tensors`);
    } else await new Promise((res) => setTimeout(res, delay));
    process.kill(ctx.pids()[0]!, 'SIGKILL');
    await joinKilled(t, ctx, `consumer ${round}`);
    ready.close();
  }
  // What the last consumers did not take, this process takes and lets go of.
  const q = ch.consumerEnd as mp.Queue | mp.SimpleQueue;
  let drained = 0;
  while (!q.empty()) {
    ((await q.get()) as mp.Tensor).release();
    drained++;
  }
  t.stats.drained = drained;
  ch.close();
  t.phase('waiting for memory and descriptors to come back');
  const within = (now: number, was: number): boolean => now <= was * 1.01;
  let now = start;
  try {
    const ms = await waitFor(() => {
      now = usage();
      return (
        within(now.fds, start.fds) && within(now.mapped, start.mapped) && within(now.resident, start.resident) && now.names <= start.names
      );
    }, 15_000);
    t.stats.backMs = Math.round(ms);
  } catch {
    t.fail('not-back', `15 s after the 40th kill: at the start ${JSON.stringify(start)}, now ${JSON.stringify(now)}`);
  }
}

/** A producer under an open-file limit of 256 goes on while this process holds `count` of its tensors. */
export async function lowFd(t: Trial): Promise<void> {
  const p = t.p;
  const r = new Prng(p.seed ^ 0x27d4eb2f);
  const ch = makeChannel(p);
  const started = new mp.Event();
  const prod = mp.spawn(target('produceAfter'), { args: [ch.producerEnd, started, elementsOf(p), p.count], join: false });
  t.phase('started', { producer: prod.pids() });
  execFileSync('prlimit', ['--pid', String(prod.pids()[0]), '--nofile=256:256']);
  started.set();
  const held: mp.Tensor[] = [];
  // Some trials let go of a random share as they go; the rest hold all of it.
  const keep = r.pick([1, 1, 0.9, 0.5]);
  for (let seq = 0; seq < p.count; seq++) {
    const m = await get(ch.consumerEnd);
    const bad = checkMessage(m, elementsOf(p));
    if (bad !== null) t.fail('corrupt', bad);
    else if ((m as { seq: number }).seq !== seq) t.fail('duplicate-or-order', `message ${(m as { seq: number }).seq} where ${seq} was due`);
    const x = (m as { t: mp.Tensor }).t;
    if (x instanceof mp.Tensor) {
      if (r.next() < keep) held.push(x);
      else x.release();
    }
  }
  t.stats.held = held.length;
  await joinClean(t, prod, 'producer under 256 descriptors');
  for (const x of held) x.release();
  ch.close();
  started.close();
}

/** A consumer under an open-file limit of 128: ERR_TP_TOO_MANY_FILES where it runs out, and every message once, in order. */
export async function lowFdConsumer(t: Trial): Promise<void> {
  const p = t.p;
  const ch = makeChannel(p);
  const out = new mp.SimpleQueue<{ problems: string[]; errors: number; mostHeld: number }>();
  const started = new mp.Event();
  // Where the consumer fills its descriptor table (from the seed): at its first get, or later.
  const fillAt = new Prng(p.seed ^ 0x165667b1).pick([0, 1, 10, 100, 300]);
  const cons = mp.spawn(target('consumeUnderLimit'), { args: [ch.consumerEnd, out, started, elementsOf(p), p.count, fillAt], join: false });
  t.phase('started', { consumer: cons.pids() });
  execFileSync('prlimit', ['--pid', String(cons.pids()[0]), '--nofile=128:128']);
  started.set();
  const producing = (async () => {
    for (let seq = 0; seq < p.count; seq++) {
      const x = mp.empty([elementsOf(p)], { dtype: 'int32', shared: true }).fill(stamp(0, seq));
      await put(ch.producerEnd, { from: 0, seq, t: x });
      x.release();
    }
  })();
  const r = await out.get();
  await producing;
  for (const pr of r.problems)
    t.fail(
      pr.startsWith('get:') ? 'get-error' : pr.includes(' where ') ? 'duplicate-or-order' : 'corrupt',
      `consumer under 128 descriptors: ${pr}`,
    );
  t.stats.tooManyFiles = r.errors;
  t.stats.mostHeld = r.mostHeld;
  t.stats.fillAt = fillAt;
  // With its table full, the next get must have found no descriptor: else the limit was never reached.
  if (r.errors === 0 && r.problems.length === 0)
    t.fail('never-out', `the consumer filled its descriptor table after ${fillAt} messages and no get ran out`);
  await joinClean(t, cons, 'consumer under 128 descriptors');
  ch.close();
  out.close();
  started.close();
}

/**
 * A private tmpfs of 24 MiB is /dev/shm (the runner starts this trial in a mount namespace):
 * the producer's 4 MiB tensors fill it while this process holds them; it must get
 * ERR_TP_SHM_FULL (no SIGBUS, no crash), and go on once they are let go of.
 */
export async function shmFull(t: Trial): Promise<void> {
  const p = t.p;
  const ch = makeChannel(p);
  const out = new mp.SimpleQueue<{ full?: number; done?: number }>();
  const go = new mp.Event();
  const prod = mp.spawn(target('produceThroughFull'), { args: [ch.producerEnd, out, go, elementsOf(p), p.count], join: false });
  t.phase('started', { producer: prod.pids() });
  const held: mp.Tensor[] = [];
  let fulls = 0;
  let next = 0;
  // The producer says "full" on `out`; messages come on the channel. Both are read in turn:
  // hold what arrives until the producer is full, then let go of everything and tell it to go on.
  const pending = { out: out.get(), msg: next < p.count ? get(ch.consumerEnd) : null };
  // A producer that fails (an error other than ERR_TP_SHM_FULL, a crash) says nothing more on
  // `out`: its end is waited for too, so that it is reported, not taken for a hang.
  let ended: Promise<{ died?: unknown }> | null = prod.join().then(
    () => ({}),
    (e: unknown) => ({ died: e }),
  );
  const joined = ended;
  for (;;) {
    const waitOn: Promise<unknown>[] = [pending.out.then((v) => ({ out: v }))];
    if (pending.msg) waitOn.push(pending.msg.then((v) => ({ msg: v })));
    if (ended) waitOn.push(ended);
    const ev = (await Promise.race(waitOn)) as { out?: { full?: number; done?: number }; msg?: unknown; died?: unknown };
    if ('died' in ev) {
      t.fail('child-failed', `the producer failed after ${next} messages: ${String(ev.died).slice(0, 800)}`);
      // The gets still pending end with the channel's close below: nobody awaits them now.
      pending.out.catch(() => {});
      pending.msg?.catch(() => {});
      break;
    }
    if (!('out' in ev) && !('msg' in ev)) {
      ended = null; // it exited cleanly: its last words are still on their way
      continue;
    }
    if (ev.msg !== undefined) {
      const bad = checkMessage(ev.msg, elementsOf(p));
      if (bad !== null) t.fail('corrupt', bad);
      else if ((ev.msg as { seq: number }).seq !== next)
        t.fail('duplicate-or-order', `message ${(ev.msg as { seq: number }).seq} where ${next} was due`);
      held.push((ev.msg as { t: mp.Tensor }).t);
      next++;
      pending.msg = next < p.count ? get(ch.consumerEnd) : null;
    } else if (ev.out?.full !== undefined) {
      fulls++;
      t.phase(`full at ${ev.out.full} with ${held.length} held`);
      for (const x of held.splice(0)) x.release();
      mp.emptyCache();
      go.set();
      pending.out = out.get();
    } else if (ev.out?.done !== undefined) {
      if (next < p.count && pending.msg) {
        // The last messages may still be on their way.
        while (next < p.count) {
          const m = await pending.msg!;
          if (checkMessage(m, elementsOf(p)) !== null) t.fail('corrupt', checkMessage(m, elementsOf(p))!);
          held.push((m as { t: mp.Tensor }).t);
          next++;
          pending.msg = next < p.count ? get(ch.consumerEnd) : null;
        }
      }
      break;
    }
  }
  t.stats.fulls = fulls;
  if (fulls === 0 && t.failures.length === 0) t.fail('never-full', `${p.count} tensors of 4 MiB fit in a 24 MiB /dev/shm`);
  for (const x of held) x.release();
  await joined;
  ch.close();
  out.close();
  go.close();
  mp.emptyCache();
  // This namespace's /dev/shm is the trial's alone: after the graces nothing may be left.
  try {
    await waitFor(() => readdirSync('/dev/shm').filter((n) => n.startsWith('tensorproc_')).length === 0, 2500);
  } catch {
    t.fail('shm-left', `in the private /dev/shm: ${readdirSync('/dev/shm').join(' ')}`);
  }
}
