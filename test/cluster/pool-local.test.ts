// A cluster Pool whose slots are all on the head's own host (NOTE [Same-host slots]): the head
// runs their workers itself, as a local Pool, and the agent only holds the slots. Every
// contract of the cluster Pool holds: results in order, chunks whole, the initializer, errors
// with class and host, a killed worker's task rejects with host and the pool goes on, the
// agent's death is HostLostError; stats() and pids() are the local Pool's.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { HostLostError, Pool, ProcessExitedException, Tensor, full } from '../../src/index.js';
import { checkLeaks } from '../helpers/leaks.js';
import { running } from '../helpers/procs.js';
import { waitFor } from '../helpers/wait.js';
import { exited, startAgent, startNats, type AgentProc, type NatsCluster } from '../helpers/nats.js';

const root = fileURLToPath(new URL('./fixtures/', import.meta.url));
const T = (name: string) => ({ module: 'tasks.js', export: name });
const range = (n: number): number[] => Array.from({ length: n }, (_, i) => i);
type Where = { x: unknown; host: string; pid: number };

let nats: NatsCluster;
let l: AgentProc;
before(async () => {
  nats = await startNats(1);
  l = await startAgent(nats.servers, 'L', 2, root);
});
after(async () => {
  await l?.stop();
  await nats?.stop();
});
checkLeaks();

describe("a cluster Pool on its head's own host", { timeout: 60_000 }, () => {
  let pool: Pool;
  before(() => {
    pool = new Pool({
      processes: 2,
      initializer: T('init'),
      initargs: ['ready'],
      cluster: { servers: nats.servers, root, hostId: 'L', hostTimeout: 1500 },
    });
  });
  after(async () => {
    pool.close();
    await pool.join();
  });

  it("runs every call in the head's own workers: results in order, chunks whole, the initializer's state", async () => {
    const r = (await pool.map(T('where'), range(16), { chunksize: 2 })) as Where[];
    assert.deepEqual(
      r.map((w) => w.x),
      range(16),
    );
    const pids = pool.pids();
    assert.equal(pids.length, 2);
    for (let i = 0; i < 16; i += 2) assert.equal(r[i]!.pid, r[i + 1]!.pid, 'a chunk runs in one worker');
    for (const w of r) {
      assert.equal(w.host, 'L', 'the workers see TENSORPROC_HOST_ID');
      assert.ok(pids.includes(w.pid));
    }
    assert.deepEqual(await pool.apply(T('initValue')), { value: 'ready', host: 'L' });
    assert.deepEqual(
      ((await pool.starmap(T('where'), [[1], [2]])) as Where[]).map((w) => w.x),
      [1, 2],
    );
    const ordered: unknown[] = [];
    for await (const w of pool.imap<Where>(T('where'), range(5))) ordered.push(w.x);
    assert.deepEqual(ordered, range(5));
    const unordered: unknown[] = [];
    for await (const w of pool.imapUnordered<Where>(T('where'), range(5), { chunksize: 2 })) unordered.push(w.x);
    assert.deepEqual(unordered.sort(), range(5));
    const s = pool.stats();
    assert.equal(s.workers.length, 2);
    assert.ok(s.done >= 16 + 1 + 2 + 5 + 5);
  });

  it('shares tensors with its workers, as a local Pool does', async () => {
    const t = full([1024], 3, { dtype: 'float32' });
    const [sum, back, host] = (await pool.apply(T('sumAndDouble'), [t])) as [number, Tensor, string];
    assert.equal(sum, 3 * 1024);
    assert.equal(host, 'L');
    assert.ok(back instanceof Tensor && back.isShared());
    assert.equal(t.get(0), 6, 'the same shared memory: the write is seen');
  });

  it("rejects with the task's error, its class kept and its host added", async () => {
    await assert.rejects(pool.map(T('boom'), range(6), { chunksize: 1 }), (e: unknown) => {
      assert.ok(e instanceof RangeError);
      assert.match((e as Error).message, /three is not allowed/);
      assert.equal((e as unknown as { host: string }).host, 'L');
      return true;
    });
  });

  it('a SIGKILLed worker rejects its task with ProcessExitedException and host; the pool goes on', async () => {
    await assert.rejects(pool.apply(T('dieOn'), ['die']), (e: unknown) => {
      assert.ok(e instanceof ProcessExitedException);
      assert.equal(e.code, 'ERR_TP_PROCESS_EXITED');
      assert.equal(e.host, 'L');
      assert.equal(e.signalName, 'SIGKILL');
      return true;
    });
    const r = (await pool.map(T('where'), range(4), { chunksize: 1 })) as Where[];
    assert.deepEqual(
      r.map((w) => w.x),
      range(4),
    );
  });
});

it("the agent's death is HostLostError for what the head's own workers held; they are stopped", { timeout: 30_000 }, async () => {
  const m = await startAgent(nats.servers, 'M', 2, root);
  const pool = new Pool({ processes: 2, cluster: { servers: nats.servers, root, hostId: 'M', hostTimeout: 1000 } });
  try {
    await pool.map(T('where'), range(2), { chunksize: 1 });
    const pids = pool.pids();
    assert.equal(pids.length, 2);
    const held = pool.map(T('holdAlive'), range(2), { chunksize: 1 });
    m.proc.kill('SIGKILL');
    await exited(m.proc);
    await assert.rejects(held, (e: unknown) => {
      assert.ok(e instanceof HostLostError, `${(e as Error).name}: ${(e as Error).message}`);
      assert.equal(e.code, 'ERR_TP_HOST_LOST');
      assert.equal(e.host, 'M');
      return true;
    });
    await waitFor(() => pids.every((p) => !running(p)), 10_000);
    await assert.rejects(pool.apply(T('where'), [1]), HostLostError);
  } finally {
    pool.close();
    await pool.join();
    await m.stop().catch(() => {});
  }
});
