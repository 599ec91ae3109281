// The Pool on a cluster (NOTE [Cluster pool], docs/cluster.md): one real nats-server on loopback
// and two agents, hosts A (the head's own) and B; a map across both whose workers report their
// host; results in order, chunksize, errors; tensors both ways; a SIGKILLed worker on B rejects
// its task with ProcessExitedException (+ host) and the pool goes on; the head's death ends its
// workers on every host; an agent's death is HostLostError for what it held, the rest goes on.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { HostLostError, Pool, ProcessExitedException, Tensor, full } from '../../src/index.js';
import { checkLeaks } from '../helpers/leaks.js';
import { running } from '../helpers/procs.js';
import { waitFor } from '../helpers/wait.js';
import { exited, headDeathEndsWorkers, startAgent, startNats, type AgentProc, type NatsCluster } from '../helpers/nats.js';

const root = fileURLToPath(new URL('./fixtures/', import.meta.url));
const T = (name: string) => ({ module: 'tasks.js', export: name });
const range = (n: number): number[] => Array.from({ length: n }, (_, i) => i);
type Where = { x: unknown; host: string; pid: number };

let nats: NatsCluster;
let a: AgentProc;
let b: AgentProc;
before(async () => {
  nats = await startNats(1);
  [a, b] = await Promise.all([startAgent(nats.servers, 'A', 2, root), startAgent(nats.servers, 'B', 2, root)]);
});
after(async () => {
  await Promise.all([a?.stop(), b?.stop()]);
  await nats?.stop();
});
// After the hooks above: its snapshot is taken with the servers and agents running.
checkLeaks();

describe('a cluster Pool over two hosts', { timeout: 60_000 }, () => {
  let pool: Pool;
  before(() => {
    pool = new Pool({ processes: 4, cluster: { servers: nats.servers, root, hostId: 'A', hostTimeout: 1500 } });
  });
  after(async () => {
    pool.close();
    await pool.join();
  });

  it('maps across both hosts, results in order, chunks kept whole', async () => {
    const r = (await pool.map(T('where'), range(16), { chunksize: 2 })) as Where[];
    assert.deepEqual(
      r.map((w) => w.x),
      range(16),
    );
    assert.deepEqual(new Set(r.map((w) => w.host)), new Set(['A', 'B']));
    for (let i = 0; i < 16; i += 2) assert.equal(r[i]!.pid, r[i + 1]!.pid, 'a chunk runs in one worker');
    const [w] = (await pool.starmap(T('where'), [[7]])) as Where[];
    // The head's host first. Not which of A's workers: the agent hands its chunks to whichever
    // worker is free, so one of them may have run none of the map's.
    assert.equal(w!.host, 'A');
  });

  it("rejects a map with its task's error, rebuilt with its class and host", async () => {
    await assert.rejects(pool.map(T('boom'), range(6), { chunksize: 1 }), (e: unknown) => {
      assert.ok(e instanceof RangeError);
      assert.match((e as Error).message, /three is not allowed/);
      assert.ok(['A', 'B'].includes((e as unknown as { host: string }).host));
      return true;
    });
  });

  it('copies tensors between hosts into shared memory, both ways; on its own host, shares them', async () => {
    // The first four applies go to A (the head's host), the next to B (two chunks a slot).
    const ts = range(6).map((i) => full([1024], i, { dtype: 'float32' }));
    const rs = (await Promise.all(ts.map((t) => pool.apply(T('sumAndDouble'), [t])))) as [number, Tensor, string][];
    assert.deepEqual(
      rs.map((r) => r[0]),
      range(6).map((i) => i * 1024),
    );
    assert.deepEqual(new Set(rs.map((r) => r[2])), new Set(['A', 'B']));
    for (let i = 0; i < 6; i++) {
      assert.ok(rs[i]![1] instanceof Tensor && rs[i]![1].isShared());
      assert.equal(rs[i]![1].get(1023), 2 * i);
      if (rs[i]![2] === 'B') assert.equal(ts[i]!.get(0), i, 'a copy: the sender does not see the remote write');
      // A is the head's own host: its workers are the head's, as in a local Pool (NOTE [Same-host slots]).
      else assert.equal(ts[i]!.get(0), 2 * i, 'shared memory: the write is seen, as in a local Pool');
    }
  });

  it("stats() counts every host's tasks; pids() are the head's own host's workers", async () => {
    const before = pool.stats();
    const r = (await pool.map(T('where'), range(8), { chunksize: 1 })) as Where[];
    const after = pool.stats();
    assert.equal(after.done - before.done, 8);
    assert.equal(after.queued, 0);
    assert.equal(after.inFlight, 0);
    const pids = pool.pids();
    assert.equal(pids.length, 2);
    for (const w of r) if (w.host === 'A') assert.ok(pids.includes(w.pid), `A's worker ${w.pid} is one of ${pids}`);
    assert.deepEqual(
      after.workers.map((w) => w.pid),
      pids,
    );
  });

  it('imap reads an endless input lazily and yields as chunks come back; leaving early ends the call', async () => {
    let read = 0;
    function* naturals(): Generator<number> {
      for (let n = 0; ; n++, read++) yield n;
    }
    const got: Where[] = [];
    for await (const w of pool.imap<Where>(T('where'), naturals(), { chunksize: 2, buffersize: 16 })) {
      got.push(w);
      if (got.length === 20) break;
    }
    assert.deepEqual(
      got.map((w) => w.x),
      range(20),
    );
    // Chunks 0-3 fill A's two slots (two chunks a slot), 4-7 go to B.
    assert.deepEqual(new Set(got.map((w) => w.host)), new Set(['A', 'B']));
    assert.ok(read <= 20 + 16 + 2, `at most buffersize tasks read ahead of the consumer: read ${read}`);
    const unordered: number[] = [];
    for await (const w of pool.imapUnordered<Where>(T('where'), range(12), { chunksize: 1 })) unordered.push(w.x as number);
    assert.deepEqual(
      unordered.sort((x, y) => x - y),
      range(12),
    );
    assert.equal(pool.stats().queued, 0, 'the ended call left nothing queued');
  });

  it('imap with a throwing task: the values before it, then its error; the pool goes on', async () => {
    const got: number[] = [];
    await assert.rejects(
      async () => {
        for await (const x of pool.imap<number>(T('boom'), range(6))) got.push(x);
      },
      (e: unknown) => e instanceof RangeError && /three is not allowed/.test((e as Error).message),
    );
    assert.deepEqual(got, [0, 1, 2]);
    const ac = new AbortController();
    await assert.rejects(
      async () => {
        let n = 0;
        for await (const _ of pool.imap(T('where'), range(1000), { signal: ac.signal })) if (++n === 5) ac.abort();
      },
      (e: unknown) => (e as Error).name === 'AbortError' && (e as { code?: string }).code === 'ABORT_ERR',
    );
    // A signal aborted before the call: nothing runs, and nothing is read.
    let read = 0;
    const counted = function* (): Generator<number> {
      for (;;) yield read++;
    };
    await assert.rejects(
      async () => {
        for await (const _ of pool.imapUnordered(T('where'), counted(), { signal: AbortSignal.abort() }));
      },
      (e: unknown) => (e as Error).name === 'AbortError',
    );
    assert.equal(read, 0);
    assert.deepEqual(
      ((await pool.map(T('where'), range(4))) as Where[]).map((w) => w.x),
      range(4),
    );
  });

  it('a SIGKILLed worker on B rejects its task with ProcessExitedException and host; the pool goes on', async () => {
    // From an idle pool, applies 0-3 fill A's slots (two chunks each), 4-7 go to B: 'die' at 5
    // kills a worker on B. The tests before leave chunks behind on B (an imap left by its
    // error goes on there; aborted ones come back as failed): with B still full, 'die' waited
    // for a free slot and A's came first (CI, 2 loaded cores). So it starts from idle.
    await waitFor(() => pool.stats().inFlight === 0 && pool.stats().queued === 0);
    const xs = ['a', 'b', 'c', 'd', 'e', 'die', 'g', 'h'];
    const rs = await Promise.allSettled(xs.map((x) => pool.apply(T('dieOn'), [x])));
    const died = rs[5]!;
    assert.equal(died.status, 'rejected');
    const e = (died as PromiseRejectedResult).reason as ProcessExitedException;
    assert.ok(e instanceof ProcessExitedException);
    assert.equal(e.code, 'ERR_TP_PROCESS_EXITED');
    assert.equal(e.host, 'B');
    assert.equal(e.signalName, 'SIGKILL');
    assert.equal(e.exitCode, -9);
    for (let i = 0; i < 4; i++) assert.deepEqual(rs[i], { status: 'fulfilled', value: { x: xs[i], host: 'A' } });
    // Others held by the same worker on B may go with it (as in a local Pool); never one on A.
    for (const r of rs.slice(4)) if (r.status === 'rejected') assert.equal((r.reason as ProcessExitedException).host, 'B');
    const again = (await pool.map(T('where'), range(8), { chunksize: 1 })) as Where[];
    assert.deepEqual(new Set(again.map((w) => w.host)), new Set(['A', 'B']));
  });
});

it("an agent gives a chunk's tensors back once it has replied: one segment serves a run of tasks", { timeout: 30_000 }, async () => {
  // The head says it is host Z, so every slot is remote: its one worker is on A.
  await using pool = new Pool({ processes: 1, cluster: { servers: nats.servers, root, hostId: 'Z' } });
  const t = full([1 << 18], 1, { dtype: 'float32' }); // 1 MiB
  const segments = (): number =>
    new Set(
      readFileSync(`/proc/${a.proc.pid}/maps`, 'utf8')
        .split('\n')
        .filter((l) => /memfd:|\/dev\/shm\//.test(l))
        .map((l) => l.split(/\s+/)[4]),
    ).size;
  const before = segments();
  for (let i = 0; i < 20; i++) assert.equal(await pool.apply(T('nbytesReleased'), [t]), 1 << 20);
  // Left to the agent's collector, each task's copy would hold a segment of its own: 20 more.
  assert.ok(segments() - before <= 3, `the agent maps ${segments() - before} more segments after 20 tasks`);
});

it("an aborted call's chunk that an agent holds and has not begun never runs there", { timeout: 30_000 }, async () => {
  const dir = mkdtempSync(join(tmpdir(), 'tp-cancel-'));
  try {
    // The head says it is host Z: its one slot is on agent A, which holds two chunks a slot.
    await using pool = new Pool({ processes: 1, cluster: { servers: nats.servers, root, hostId: 'Z' } });
    const [gate, marker] = [join(dir, 'gate'), join(dir, 'marker')];
    const held = pool.apply(T('waitForFile'), [gate]);
    const ac = new AbortController();
    const aborted = pool.apply(T('mark'), [marker], { signal: ac.signal });
    await waitFor(() => pool.stats().inFlight === 2); // both chunks are with A, the second behind the first
    ac.abort();
    await assert.rejects(aborted, (e: unknown) => (e as Error).name === 'AbortError');
    writeFileSync(gate, '');
    assert.equal(await held, 'A');
    // A's one worker takes its chunks in order: once this one is back, the aborted one would have run.
    await pool.apply(T('where'), [1]);
    assert.equal(existsSync(marker), false, 'the aborted chunk ran on A');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

it("the head's death ends its workers on every host", { timeout: 30_000 }, async () => {
  // The agents hear no heartbeat for the head's lease (1 s), then stop its workers.
  await headDeathEndsWorkers(fileURLToPath(new URL('./fixtures/head-main.js', import.meta.url)), nats.servers, root, (pids) =>
    assert.ok(pids.length >= 2, `workers on both hosts: ${pids}`),
  );
});

it("an agent's death is HostLostError for the tasks it held; the rest goes on", { timeout: 30_000 }, async () => {
  const pool = new Pool({ processes: 4, cluster: { servers: nats.servers, root, hostId: 'A', hostTimeout: 1000 } });
  try {
    const seen = (await pool.map(T('where'), range(8), { chunksize: 1 })) as Where[];
    const onB = [...new Set(seen.filter((w) => w.host === 'B').map((w) => w.pid))];
    assert.ok(onB.length > 0);
    // Applies 0-3 go to A and return; 4-7 go to B and never finish there.
    const held = range(8).map(() => pool.apply(T('holdOn'), ['B']));
    assert.deepEqual(await Promise.all(held.slice(0, 4)), ['A', 'A', 'A', 'A']);
    b.proc.kill('SIGKILL');
    await exited(b.proc);
    for (const p of held.slice(4)) {
      await assert.rejects(p, (e: unknown) => {
        assert.ok(e instanceof HostLostError);
        assert.equal(e.code, 'ERR_TP_HOST_LOST');
        assert.equal(e.host, 'B');
        return true;
      });
    }
    // B's workers died with their agent (children die with their parent); A goes on.
    await waitFor(() => onB.every((p) => !running(p)), 10_000);
    const r = (await pool.map(T('where'), range(6), { chunksize: 1 })) as Where[];
    assert.deepEqual(new Set(r.map((w) => w.host)), new Set(['A']));
  } finally {
    pool.close();
    await pool.join();
  }
});
