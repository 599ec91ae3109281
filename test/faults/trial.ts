// One trial of the fault campaign (NOTE [Fault trials] in plan.ts): `node trial.js KIND SEED`.
// This process is the parent: it starts real children with mp.spawn, attacks them, and tells
// the runner on stdout, one JSON line each, its phases (`{ phase, pids? }`, so that a hang is
// reported with what was going on) and finally `{ result: { failures, stats } }`.
import { readdirSync } from 'node:fs';
import * as mp from '../../src/index.js';
import { KINDS, planTrial, type Kind } from './plan.js';
import { Trial } from './trial-kit.js';
import { exactlyOnce, killConsumer, killParent, killProducer } from './trial-kills.js';
import { garbage } from './trial-garbage.js';
import { badInput } from './trial-bad-input.js';
import { otherUid } from './trial-other-uid.js';
import { killReceivers } from './trial-receivers.js';
import { holders40, lowFd, lowFdConsumer, shmFull } from './trial-limits.js';

const RUN: Record<Kind, (t: Trial) => Promise<void>> = {
  'kill-producer': killProducer,
  'kill-consumer': killConsumer,
  'kill-parent': killParent,
  'exactly-once': exactlyOnce,
  'holders-40': holders40,
  'low-fd': lowFd,
  'low-fd-consumer': lowFdConsumer,
  'shm-full': shmFull,
  garbage,
  'bad-input': badInput,
  'other-uid': otherUid,
  'kill-receivers': killReceivers,
};

async function main(): Promise<void> {
  const [kind, seed] = process.argv.slice(2);
  if (!KINDS.includes(kind as Kind)) throw new Error(`usage: trial.js KIND SEED (KIND one of ${KINDS.join(', ')})`);
  const p = planTrial(kind as Kind, Number(seed));
  mp.setSharingStrategy(p.strategy);
  const t = new Trial(p);
  try {
    await RUN[p.kind](t);
  } catch (e) {
    t.fail('error', (e as Error).stack ?? String(e));
  }
  t.stats.fds = readdirSync('/proc/self/fd').length;
  process.stdout.write(`${JSON.stringify({ result: { failures: t.failures, stats: t.stats } })}\n`);
}

await main();
