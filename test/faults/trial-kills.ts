// The kill trials of the fault campaign (NOTE [Fault trials] in plan.ts): a producer, a
// consumer or the parent SIGKILLed at a point drawn from the seed, and 8 x 8 exactly-once.
import * as mp from '../../src/index.js';
import { put, type ConsumerReport } from './targets.js';
import { checkReport, elementsOf, joinClean, joinKilled, makeChannel, target, type Trial } from './trial-kit.js';

export async function killProducer(t: Trial): Promise<void> {
  const p = t.p;
  const ch = makeChannel(p);
  const out = new mp.SimpleQueue<ConsumerReport>();
  const flowing = new mp.Event();
  const prod = mp.spawn(target('produce'), { args: [ch.producerEnd, elementsOf(p), null, 0], join: false });
  const cons = mp.spawn(target('consume'), { args: [ch.consumerEnd, out, flowing, elementsOf(p), null, 0, null, p.hold], join: false });
  t.phase('started', { producer: prod.pids(), consumer: cons.pids() });
  await t.killPoint(flowing);
  t.phase('killing producer');
  process.kill(prod.pids()[0]!, 'SIGKILL');
  await joinKilled(t, prod, 'producer');
  t.phase('end of stream');
  await put(ch.producerEnd, null);
  t.phase('waiting for the consumer');
  const r = await out.get();
  checkReport(t, r);
  t.stats.got = r.got;
  await joinClean(t, cons, 'consumer');
  ch.close();
  out.close();
  flowing.close();
}

export async function killConsumer(t: Trial): Promise<void> {
  const p = t.p;
  const ch = makeChannel(p);
  const out = new mp.SimpleQueue<ConsumerReport>();
  const flowing = new mp.Event();
  const seen = mp.zeros([2, p.count], { dtype: 'int32', shared: true });
  const prod = mp.spawn(target('produce'), { args: [ch.producerEnd, elementsOf(p), p.count, 0], join: false });
  const first = mp.spawn(target('consume'), { args: [ch.consumerEnd, out, flowing, elementsOf(p), seen, p.count, 0, p.hold], join: false });
  t.phase('started', { producer: prod.pids(), consumer: first.pids() });
  await t.killPoint(flowing);
  t.phase('killing the first consumer');
  process.kill(first.pids()[0]!, 'SIGKILL');
  await joinKilled(t, first, 'first consumer');
  const second = mp.spawn(target('consume'), {
    args: [ch.consumerEnd, out, flowing, elementsOf(p), seen, p.count, 1, p.hold],
    join: false,
  });
  t.phase('second consumer', { consumer2: second.pids() });
  await joinClean(t, prod, 'producer');
  t.phase('end of stream');
  await put(ch.producerEnd, null);
  t.phase('waiting for the second consumer');
  const r = await out.get();
  checkReport(t, r);
  await joinClean(t, second, 'second consumer');
  const rows = [0, 1].map((k) => seen.select(0, k).data as Int32Array);
  let lost = 0;
  for (let k = 0; k < p.count; k++) {
    const n = rows[0]![k]! + rows[1]![k]!;
    if (n > 1) t.fail('duplicate', `message 0/${k} arrived ${n} times (first consumer ${rows[0]![k]}, second ${rows[1]![k]})`);
    if (n === 0) lost++;
  }
  // The first consumer may have taken messages from the socket it had not counted yet when it
  // died: one get at a time, so at most one (a Queue may have read one more ahead).
  t.stats.lost = lost;
  if (lost > 2) t.fail('lost', `${lost} messages of ${p.count} reached neither consumer`);
  seen.release();
  ch.close();
  out.close();
  flowing.close();
}

export async function killParent(t: Trial): Promise<void> {
  const p = t.p;
  const ch = makeChannel(p);
  const out = new mp.SimpleQueue<ConsumerReport>();
  const flowing = new mp.Event();
  const prod = mp.spawn(target('produce'), { args: [ch.producerEnd, elementsOf(p), null, 0], join: false });
  const cons = mp.spawn(target('consume'), {
    args: [ch.consumerEnd, out, flowing, elementsOf(p), null, 0, null, Math.max(1, p.hold)],
    join: false,
  });
  t.phase('started', { producer: prod.pids(), consumer: cons.pids() });
  if (p.fromFlow) await flowing.wait(20_000);
  // The runner kills this process `delayMs` after this line.
  t.phase('kill me');
  setInterval(() => {}, 2 ** 30);
  await new Promise(() => {});
}

export async function exactlyOnce(t: Trial): Promise<void> {
  const p = t.p;
  const n = 8;
  const ch = makeChannel(p);
  const out = new mp.SimpleQueue<ConsumerReport>();
  const flowing = new mp.Event();
  const seen = mp.zeros([n, n * p.count], { dtype: 'int32', shared: true });
  const cons = mp.spawn(target('consume'), {
    args: [ch.consumerEnd, out, flowing, elementsOf(p), seen, p.count, null, p.hold],
    nprocs: n,
    join: false,
  });
  const prod = mp.spawn(target('produce'), { args: [ch.producerEnd, elementsOf(p), p.count, null], nprocs: n, join: false });
  t.phase('started', { producers: prod.pids(), consumers: cons.pids() });
  await joinClean(t, prod, 'producers');
  t.phase('end of stream');
  for (let k = 0; k < n; k++) await put(ch.producerEnd, null);
  t.phase('waiting for the consumers');
  for (let k = 0; k < n; k++) checkReport(t, await out.get());
  await joinClean(t, cons, 'consumers');
  const rows = Array.from({ length: n }, (_, k) => seen.select(0, k).data as Int32Array);
  let missing = 0;
  let twice = 0;
  for (let id = 0; id < n * p.count; id++) {
    let c = 0;
    for (const row of rows) c += row[id]!;
    if (c === 0) missing++;
    if (c > 1) twice++;
  }
  if (missing) t.fail('lost', `${missing} of ${n * p.count} messages never arrived`);
  if (twice) t.fail('duplicate', `${twice} of ${n * p.count} messages arrived more than once`);
  t.stats.messages = n * p.count;
  seen.release();
  ch.close();
  out.close();
  flowing.close();
}
