// The DataLoader on a cluster (NOTE [Cluster loader], docs/cluster.md): one nats-server and
// agents A (the head's own host: its workers run by the head) and B (in a network namespace of
// its own where root allows it, else a plain process). An epoch over both gives every sample
// once, in the order and with the seeds of a local loader with the same seed (inOrder: false
// too; persistent workers; a DistributedSampler per rank); stateDict() resumes; a remote
// worker SIGKILLed mid-epoch is a coded error, or with maxWorkerRestarts its batches re-run;
// an agent SIGKILLed mid-epoch is HostLostError, without a hang; the head's death ends its
// workers on every host; bad options are coded errors.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  ClusterUnavailableError,
  DataLoader,
  DataLoaderTimeoutError,
  DataLoaderWorkerExitedError,
  DatasetNeedsTargetError,
  DistributedSampler,
  HostLostError,
  InvalidArgumentError,
  TensorDataset,
  Tensor,
  full,
  releaseTensors,
  type DataLoaderOptions,
} from '../../src/index.js';
import { checkLeaks } from '../helpers/leaks.js';
import { running } from '../helpers/procs.js';
import {
  freePort,
  makeNetnsHosts,
  netnsNames,
  startAgent,
  startAgentIn,
  startNats,
  headDeathEndsWorkers,
  type AgentProc,
  type NatsCluster,
  type NetnsHosts,
} from '../helpers/nats.js';
import type { Faults } from './fixtures/loader-data.js';

const root = fileURLToPath(new URL('./fixtures/', import.meta.url));
const DATA = (n: number, faults: Faults = {}) => ({ module: 'loader-data.js', export: 'makeDataset', args: [n, faults] });
const LOCAL = (n: number) => ({ module: new URL('./fixtures/loader-data.js', import.meta.url), export: 'makeDataset', args: [n, {}] });
const ITER = (n: number) => ({ module: 'loader-data.js', export: 'makeIterable', args: [n] });
const LOCAL_ITER = (n: number) => ({ module: new URL('./fixtures/loader-data.js', import.meta.url), export: 'makeIterable', args: [n] });
type Row = { i: number; worker: number; seed: number; rand: number; host: string };

/** A batch's samples as rows; the batch is released. */
function rows(b: unknown): Row[] {
  const o = b as Record<string, unknown>;
  const col = (k: string): number[] => Array.from((o[k] as Tensor).data as ArrayLike<number | bigint>, Number);
  const [i, worker, seed, rand] = [col('i'), col('worker'), col('seed'), col('rand')];
  const x = o.x as Tensor;
  assert.ok(x instanceof Tensor && x.isShared(), 'tensors arrive as shared tensors of this host');
  for (let k = 0; k < i.length; k++) assert.equal(x.get(k, 0), i[k]);
  const out = i.map((v, k) => ({ i: v, worker: worker[k]!, seed: seed[k]!, rand: rand[k]!, host: (o.host as string[])[k]! }));
  releaseTensors(b);
  return out;
}

async function epoch(loader: AsyncIterable<unknown>, limit = Number.POSITIVE_INFINITY): Promise<Row[][]> {
  const out: Row[][] = [];
  for await (const b of loader) {
    out.push(rows(b));
    if (out.length >= limit) break;
  }
  return out;
}

const strip = (bs: Row[][]) => bs.map((b) => b.map(({ host: _h, ...r }) => r));
const indices = (bs: Row[][]) => bs.flat().map((r) => r.i);

const nsBefore = new Set(netnsNames());
let netns: NetnsHosts | string;
let nats: NatsCluster;
let agents: AgentProc[] = [];
let cluster: { servers: string; root: string; hostId: string; hostTimeout: number };
before(async () => {
  netns = makeNetnsHosts(1);
  try {
    nats = await startNats(1, false, [], '0.0.0.0');
    const port = new URL(nats.urls[0]!).port;
    const b =
      typeof netns === 'string'
        ? startAgent(nats.servers, 'B', 1, root)
        : startAgentIn(netns.hosts[0]!.ns, `nats://${netns.hosts[0]!.hereIp}:${port}`, 'B', 1, root);
    agents = await Promise.all([startAgent(nats.servers, 'A', 1, root), b]);
  } catch (e) {
    await Promise.all(agents.map((a) => a.stop()));
    await nats?.stop();
    if (typeof netns !== 'string') netns.remove();
    throw e;
  }
  cluster = { servers: nats.servers, root, hostId: 'A', hostTimeout: 4000 };
});
after(async () => {
  await Promise.all(agents.map((a) => a.stop()));
  await nats?.stop();
  if (typeof netns !== 'string') netns?.remove();
  assert.deepEqual(
    netnsNames().filter((n) => !nsBefore.has(n)),
    [],
    'no network namespace left behind',
  );
});
checkLeaks();

describe('a cluster DataLoader over two hosts', { timeout: 90_000 }, () => {
  const base: DataLoaderOptions = { numWorkers: 2, batchSize: 4, shuffle: true, seed: 11 };

  it('gives every sample once, in the order and with the seeds of a local loader', async (t) => {
    const here = await epoch(new DataLoader(LOCAL(30), base));
    const there = await epoch(new DataLoader(DATA(30), { ...base, cluster }));
    assert.deepEqual(strip(there), strip(here));
    assert.deepEqual(
      indices(there).sort((a, b) => a - b),
      Array.from({ length: 30 }, (_, i) => i),
    );
    // Worker 0 on A (the head's own host), worker 1 on B.
    assert.deepEqual(new Set(there.flat().map((r) => `${r.worker}@${r.host}`)), new Set(['0@A', '1@B']));
    if (typeof netns === 'string') t.diagnostic(netns);
  });

  it('inOrder: false gives every sample once', async () => {
    const there = await epoch(new DataLoader(DATA(30), { ...base, inOrder: false, cluster }));
    assert.deepEqual(
      indices(there).sort((a, b) => a - b),
      Array.from({ length: 30 }, (_, i) => i),
    );
  });

  it('two ranks of a DistributedSampler, each a cluster loader: every sample once, as local loaders give them', async () => {
    const ranks = async (c: DataLoaderOptions['cluster'], ds: (n: number) => object) => {
      const out: Row[][][] = [];
      for (const rank of [0, 1]) {
        const sampler = new DistributedSampler(30, { numReplicas: 2, rank, seed: 5 });
        out.push(await epoch(new DataLoader(ds(30) as never, { numWorkers: 2, batchSize: 3, sampler, seed: 2, cluster: c })));
      }
      return out;
    };
    const there = await ranks(cluster, DATA);
    const here = await ranks(null, LOCAL);
    assert.deepEqual(there.map(strip), here.map(strip));
    assert.deepEqual(
      there.flatMap(indices).sort((a, b) => a - b),
      Array.from({ length: 30 }, (_, i) => i),
    );
  });

  it("an iterable dataset: each worker streams its shard on its host, the epoch is a local loader's", async () => {
    const o: DataLoaderOptions = { numWorkers: 2, batchSize: 3, seed: 4 };
    const here = await epoch(new DataLoader(LOCAL_ITER(20), o));
    const there = await epoch(new DataLoader(ITER(20), { ...o, cluster }));
    assert.deepEqual(strip(there), strip(here));
    assert.deepEqual(
      indices(there).sort((a, b) => a - b),
      Array.from({ length: 20 }, (_, i) => i),
    );
    assert.deepEqual(new Set(there.flat().map((r) => `${r.worker}@${r.host}`)), new Set(['0@A', '1@B']));
  });

  it("startMethod 'thread': workers are threads of each host's process, the epoch a local loader's", async () => {
    const o: DataLoaderOptions = { ...base, startMethod: 'thread' };
    const here = await epoch(new DataLoader(LOCAL(30), o));
    const there = await epoch(new DataLoader(DATA(30), { ...o, cluster }));
    assert.deepEqual(strip(there), strip(here));
    assert.deepEqual(new Set(there.flat().map((r) => `${r.worker}@${r.host}`)), new Set(['0@A', '1@B']));
  });

  it('timeout: a remote worker that sends nothing within it is DataLoaderTimeoutError, not a hang', async () => {
    const loader = new DataLoader(DATA(30, { hold: 'B' }), { ...base, batchSize: 2, timeout: 1000, cluster });
    const got: number[] = []; // A's first batch, if it came within the timeout too; B's never comes
    await assert.rejects(
      async () => {
        for await (const b of loader) got.push(...rows(b).map((r) => r.i));
      },
      (e: unknown) => {
        assert.ok(e instanceof DataLoaderTimeoutError, String(e));
        assert.equal(e.code, 'ERR_TP_DATALOADER_TIMEOUT');
        return true;
      },
    );
    assert.ok(got.length <= 2, `in order, nothing past worker 1's first batch: ${got}`);
    assert.deepEqual(loader.workerPids, [], 'the workers on A are stopped');
  });

  it('persistent workers keep their seeds and replicas over epochs, as local ones', async () => {
    const o = { ...base, persistentWorkers: true };
    await using here = new DataLoader(LOCAL(20), o);
    await using there = new DataLoader(DATA(20), { ...o, cluster });
    const h = [await epoch(here), await epoch(here)];
    const r = [await epoch(there), await epoch(there)];
    assert.deepEqual(r.map(strip), h.map(strip));
    assert.equal(there.workerPids.length, 1, "workerPids: the head's own host's workers");
  });

  it('stateDict() taken mid-epoch resumes the epoch in a new cluster loader', async () => {
    const here = await epoch(new DataLoader(LOCAL(30), base));
    const first = new DataLoader(DATA(30), { ...base, cluster });
    const head = await epoch(first, 3);
    const second = new DataLoader(DATA(30), { ...base, cluster });
    second.loadStateDict(first.stateDict());
    const rest = await epoch(second);
    assert.deepEqual(indices([...head, ...rest]), indices(here));
  });

  it("a remote worker SIGKILLed mid-epoch: the local loader's coded error; with maxWorkerRestarts, its batches re-run", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tp-loader-'));
    try {
      const die = { host: 'B', index: 5, marker: join(dir, 'died') };
      const failing = new DataLoader(DATA(30, { die }), { ...base, shuffle: false, cluster });
      await assert.rejects(epoch(failing), (e: unknown) => {
        assert.ok(e instanceof DataLoaderWorkerExitedError, String(e));
        assert.equal(e.signalName, 'SIGKILL');
        assert.equal(e.workerId, 1);
        return true;
      });
      const dead = Number(readFileSync(die.marker, 'utf8'));
      assert.ok(!running(dead));
      rmSync(die.marker);
      const warned: string[] = [];
      const onWarning = (w: Error) => warned.push(w.message);
      process.on('warning', onWarning);
      try {
        const restarting = new DataLoader(DATA(30, { die }), { ...base, shuffle: false, maxWorkerRestarts: 1, cluster });
        const got = await epoch(restarting);
        assert.deepEqual(
          indices(got),
          Array.from({ length: 30 }, (_, i) => i),
        );
      } finally {
        process.off('warning', onWarning);
      }
      assert.ok(warned.some((m) => /killed by signal SIGKILL/.test(m)));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('an agent SIGKILLed mid-epoch is HostLostError for its batches, without a hang; the rest is reaped', async () => {
    const c = await startAgent(nats.servers, 'C', 1, root);
    try {
      const loader = new DataLoader(DATA(30, { hold: 'C' }), { ...base, numWorkers: 3, batchSize: 2, cluster });
      const it = loader[Symbol.asyncIterator]();
      const first = [...rows((await it.next()).value), ...rows((await it.next()).value)].map((r) => r.i); // A's, then B's; C's never comes
      const lost = assert.rejects(it.next(), (e: unknown) => {
        assert.ok(e instanceof HostLostError, String(e));
        assert.equal(e.code, 'ERR_TP_HOST_LOST');
        assert.equal(e.host, 'C');
        return true;
      });
      c.proc.kill('SIGKILL');
      await lost;
      assert.deepEqual(loader.workerPids, [], 'the workers on A are stopped');
      // stateDict() resumes the epoch on the hosts left: every sample once, the lost batches included.
      const resumed = new DataLoader(DATA(30), { ...base, numWorkers: 2, batchSize: 2, cluster });
      resumed.loadStateDict(loader.stateDict());
      const rest = indices(await epoch(resumed));
      assert.deepEqual(
        [...first, ...rest].sort((a, b) => a - b),
        Array.from({ length: 30 }, (_, i) => i),
        'every sample once: the batches handed out are not given again, the lost ones are',
      );
    } finally {
      await c.stop();
    }
  });
});

describe('cluster DataLoader options', { timeout: 30_000 }, () => {
  it('refuses what it cannot place, with coded errors, before connecting', async () => {
    assert.throws(() => new DataLoader(DATA(4), { cluster }), InvalidArgumentError, 'numWorkers 0');
    assert.throws(() => new DataLoader(DATA(4), { numWorkers: 1, cluster: {} as never }), InvalidArgumentError);
    const ds = new TensorDataset(full([4, 2], 1, { dtype: 'float32' }));
    assert.throws(
      () => new DataLoader(ds, { numWorkers: 1, cluster }),
      (e: unknown) => {
        assert.ok(e instanceof DatasetNeedsTargetError);
        assert.equal(e.code, 'ERR_TP_DATASET_NEEDS_TARGET');
        assert.match(e.message, /cluster\.root/);
        return true;
      },
    );
    const outside = new DataLoader(DATA(4), { numWorkers: 1, cluster: { ...cluster, root: join(root, 'nowhere') } });
    await assert.rejects(outside.ready(), /./, 'the dataset module is not under that root');
    // A module this process can build, but not under the agents' root: refused before connecting.
    const other = fileURLToPath(new URL('../helpers/', import.meta.url));
    const stray = new DataLoader(LOCAL(4), { numWorkers: 1, cluster: { ...cluster, root: other } });
    await assert.rejects(epoch(stray), (e: unknown) => {
      assert.ok(e instanceof InvalidArgumentError);
      assert.match(e.message, /not under the cluster's code root/);
      return true;
    });
  });

  it('no server, or too few slots: ClusterUnavailableError', async () => {
    const none = { servers: `nats://127.0.0.1:${await freePort()}`, root };
    await assert.rejects(epoch(new DataLoader(DATA(4), { numWorkers: 1, cluster: none })), ClusterUnavailableError);
    const many = new DataLoader(DATA(4), { numWorkers: 9, cluster: { ...cluster, connectTimeout: 300 } });
    await assert.rejects(epoch(many), ClusterUnavailableError);
  });
});

it("the head's death ends its loader's workers on every host", { timeout: 30_000 }, async () => {
  // A's worker dies with its parent; B's agent hears no heartbeat for the lease (2 s), then stops it.
  await headDeathEndsWorkers(fileURLToPath(new URL('./fixtures/loader-head-main.js', import.meta.url)), nats.servers, root, (pids) =>
    assert.equal(pids.length, 2, `a worker on A and one on B: ${pids}`),
  );
});
