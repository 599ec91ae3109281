// The README's "Past one host": a Pool of 4 over the agents of a NATS server (docs/cluster.md).
//   node dist/examples/cluster-map.js nats://127.0.0.1:4222
import { fileURLToPath } from 'node:url';
import * as mp from 'tensorproc';

const servers = process.argv[2] ?? 'nats://127.0.0.1:4222';
const root = fileURLToPath(new URL('.', import.meta.url)); // dist/examples: the agents' --root too
await using pool = new mp.Pool({ processes: 4, cluster: { servers, root, hostId: 'a' } });
console.log(await pool.map({ module: 'cluster-task.js', export: 'where' }, [0, 1, 2, 3, 4, 5, 6, 7], { chunksize: 1 }));
