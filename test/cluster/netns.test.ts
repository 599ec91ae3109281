// Two hosts in network namespaces of their own (issue 29): one nats-server in the test's
// namespace, agents A and B each in a namespace joined to it by a veth pair, so that every byte
// between the head and a host crosses a network link. A map over both whose workers report
// their host and namespace; a 2 MiB tensor to each host and back, in many parts. Where the
// namespaces cannot be made (not root, no `ip netns`), the hosts are plain processes and the
// namespace assertion is skipped with the reason. No namespace is left behind.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readlinkSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Pool, full } from '../../src/index.js';
import { checkLeaks } from '../helpers/leaks.js';
import { makeNetnsHosts, netnsNames, startAgentIn, startNats, type AgentProc, type NatsCluster, type NetnsHosts } from '../helpers/nats.js';

const root = fileURLToPath(new URL('./fixtures/', import.meta.url));
const T = { module: 'netns-tasks.js', export: 'whereNet' };
type Where = { host: string; net: string; sum: number | null };

const nsBefore = new Set(netnsNames());
let netns: NetnsHosts | string;
let nats: NatsCluster;
let agents: AgentProc[] = [];
before(async () => {
  netns = makeNetnsHosts(2);
  try {
    if (typeof netns === 'string') {
      nats = await startNats(1);
      agents = await Promise.all(['A', 'B'].map((h) => startAgentIn(null, nats.servers, h, 2, root)));
    } else {
      const hosts = netns.hosts;
      // Every address, so that each namespace reaches it on its own pair; the head on loopback.
      nats = await startNats(1, false, [], '0.0.0.0');
      const port = new URL(nats.urls[0]!).port;
      agents = await Promise.all(['A', 'B'].map((h, i) => startAgentIn(hosts[i]!.ns, `nats://${hosts[i]!.hereIp}:${port}`, h, 2, root)));
    }
  } catch (e) {
    await Promise.all(agents.map((a) => a.stop()));
    await nats?.stop();
    if (typeof netns !== 'string') netns.remove();
    throw e;
  }
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

describe('a cluster Pool over two hosts in network namespaces', { timeout: 60_000 }, () => {
  it('maps across both hosts; each worker reports its host and namespace', async (t) => {
    // The head's host id is neither: the pool's slots are A's, then B's.
    await using pool = new Pool({ processes: 4, cluster: { servers: nats.servers, root, hostId: 'head' } });
    const r = (await pool.map(
      T,
      Array.from({ length: 8 }, (_, i) => i),
      { chunksize: 1 },
    )) as Where[];
    assert.deepEqual(new Set(r.map((w) => w.host)), new Set(['A', 'B']));
    if (typeof netns === 'string') {
      t.skip(netns);
      return;
    }
    const mine = readlinkSync('/proc/self/ns/net');
    const netOf = (h: string) => new Set(r.filter((w) => w.host === h).map((w) => w.net));
    const [a, b] = [netOf('A'), netOf('B')];
    assert.equal(a.size, 1);
    assert.equal(b.size, 1);
    assert.ok(!a.has(mine) && !b.has(mine), "neither host is in the test's namespace");
    assert.notDeepEqual(a, b, 'A and B are in namespaces of their own');
  });

  it('moves a 2 MiB tensor to each host in parts, whole', async () => {
    await using pool = new Pool({ processes: 4, cluster: { servers: nats.servers, root, hostId: 'head' } });
    const n = 2 ** 19; // 2 MiB of float32: about 34 parts of 62 KiB
    const ts = [0, 1, 2, 3, 4, 5, 6, 7].map((i) => full([n], i, { dtype: 'float32' }));
    const r = (await Promise.all(ts.map((t) => pool.apply(T, [t])))) as Where[];
    assert.deepEqual(
      r.map((w) => w.sum),
      [0, 1, 2, 3, 4, 5, 6, 7].map((i) => i * n),
    );
    assert.deepEqual(new Set(r.map((w) => w.host)), new Set(['A', 'B']));
  });
});
