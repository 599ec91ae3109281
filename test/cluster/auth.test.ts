// A cluster with credentials (docs/cluster.md, "Security"): a server that asks for a user and
// a password refuses a head without them (ClusterUnavailableError, nothing left running) and
// serves an agent and a head that give them, in the URL or as options.
import { it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { ClusterUnavailableError, Pool } from '../../src/index.js';
import { checkLeaks } from '../helpers/leaks.js';
import { startAgent, startNats, type AgentProc, type NatsCluster } from '../helpers/nats.js';

const root = fileURLToPath(new URL('./fixtures/', import.meta.url));
let nats: NatsCluster;
let agent: AgentProc;
before(async () => {
  nats = await startNats(1, false, ['authorization { user: tp, password: s3cret }']);
  agent = await startAgent(nats.servers.replace('nats://', 'nats://tp:s3cret@'), 'S', 1, root);
});
after(async () => {
  await agent?.stop();
  await nats?.stop();
});
checkLeaks();

it('a server with a password refuses a head without it, and serves one with it', { timeout: 30_000 }, async () => {
  const anonymous = new Pool({ processes: 1, cluster: { servers: nats.servers, root, hostId: 'S' } });
  await assert.rejects(anonymous.map({ module: 'tasks.js', export: 'where' }, [1]), (e: unknown) => {
    assert.ok(e instanceof ClusterUnavailableError);
    assert.equal(e.code, 'ERR_TP_CLUSTER_UNAVAILABLE');
    return true;
  });
  anonymous.terminate();
  await anonymous.join();
  const pool = new Pool({ processes: 1, cluster: { servers: nats.servers, user: 'tp', pass: 's3cret', root, hostId: 'S' } });
  try {
    assert.deepEqual(
      ((await pool.map({ module: 'tasks.js', export: 'where' }, [1, 2])) as { host: string }[]).map((w) => w.host),
      ['S', 'S'],
    );
  } finally {
    pool.close();
    await pool.join();
  }
});
