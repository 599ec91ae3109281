// cluster.Queue (NOTE [Cluster queue]) on three real nats-servers clustered on loopback: a
// producer's retry adds no duplicate; a message held by a SIGKILLed consumer is redelivered;
// SIGKILL of the stream's leader server loses nothing and duplicates nothing.
import { it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { QueueEmptyError } from '../../src/index.js';
import { Queue } from '../../src/cluster/index.js';
import { checkLeaks } from '../helpers/leaks.js';
import { exited, startNats, waitForLine, type NatsCluster } from '../helpers/nats.js';

let nats: NatsCluster;
before(async () => {
  nats = await startNats(3);
});
after(async () => {
  await nats?.stop();
});
checkLeaks();

it("a producer's retry of one id adds one message; get() takes each once", { timeout: 30_000 }, async () => {
  await using q = new Queue<{ n: number }>({ name: 'dedupe', servers: nats.servers, replicas: 3 });
  await q.put({ n: 1 }, { id: 'a' });
  await q.put({ n: 1 }, { id: 'a' }); // the same put again, as after a lost ack
  await q.put({ n: 2 }, { id: 'b' });
  assert.equal(await q.size(), 2);
  assert.deepEqual(await q.get({ timeout: 5000 }), { n: 1 });
  assert.deepEqual(await q.get({ timeout: 5000 }), { n: 2 });
  await assert.rejects(q.get({ timeout: 1000 }), (e: unknown) => e instanceof QueueEmptyError && e.code === 'ERR_TP_QUEUE_EMPTY');
  await q.destroy();
});

it('a message held by a SIGKILLed consumer goes to another', { timeout: 30_000 }, async () => {
  await using q = new Queue<string>({ name: 'redeliver', servers: nats.servers, replicas: 3, ackWait: 1000 });
  await q.put('only');
  const child = spawn(
    process.execPath,
    [fileURLToPath(new URL('./fixtures/queue-consumer-main.js', import.meta.url)), nats.servers, 'redeliver'],
    {
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  try {
    const line = await waitForLine(child, /\{"value".*\}\n/, 'the consumer');
    assert.deepEqual(JSON.parse(line), { value: 'only' });
  } finally {
    child.kill('SIGKILL');
    await exited(child);
  }
  const held = await q.getHeld({ timeout: 15_000 });
  assert.equal(held.value, 'only');
  assert.ok(held.deliveries >= 2, `deliveries ${held.deliveries}`);
  await held.ack();
  await assert.rejects(q.get({ timeout: 1500 }), QueueEmptyError);
  await q.destroy();
});

it("SIGKILL of the stream leader's server: nothing lost, nothing duplicated", { timeout: 60_000 }, async () => {
  await using q = new Queue<number>({ name: 'failover', servers: nats.servers, replicas: 3 });
  const N = 100;
  await Promise.all(Array.from({ length: N }, (_, i) => q.put(i, { id: `m${i}` })));
  // Which server leads the stream, asked of the cluster itself.
  const nc = await connect({ servers: nats.urls });
  const leader = (await (await jetstreamManager(nc)).streams.info('TP_Q_failover')).cluster?.leader;
  await nc.close();
  const i = Number(/^n(\d)$/.exec(leader ?? '')?.[1]);
  const victim = nats.procs[i]!;
  assert.ok(victim, `leader ${leader}`);
  // The survivors announce the stream's new leader: a watcher on one of them hears it.
  const watcher = await connect({ servers: nats.urls.filter((_, j) => j !== i) });
  const elected = watcher.subscribe('$JS.EVENT.ADVISORY.STREAM.LEADER_ELECTED.TP_Q_failover', { max: 1 });
  await watcher.flush();
  victim.kill('SIGKILL');
  await exited(victim);
  for await (const m of elected) {
    const { leader: next } = m.json<{ leader: string }>();
    assert.notEqual(next, leader);
  }
  await watcher.close();
  // Puts go on through the survivors, each retried with its id until the new leader acks it;
  // gets wait for what is there, bound by the test's own timeout only.
  await Promise.all(Array.from({ length: N }, (_, i) => q.put(N + i, { id: `m${N + i}` })));
  const got: number[] = [];
  for (let i = 0; i < 2 * N; i++) got.push(await q.get());
  await assert.rejects(q.get({ timeout: 1500 }), QueueEmptyError);
  assert.equal(new Set(got).size, 2 * N, 'nothing duplicated');
  assert.deepEqual(
    [...got].sort((x, y) => x - y),
    Array.from({ length: 2 * N }, (_, i) => i),
    'nothing lost',
  );
});
