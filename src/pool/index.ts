// The Pool (API.md, "Pool"). The worker set it stands on (workers/worker-set.ts, workers/worker-port.ts) is
// the DataLoader's too, imported from there directly.
export { Pool } from './pool.js';
export type { PoolOptions, CallOptions, MapOptions, ImapOptions } from './pool.js';
export type { PoolStats, PoolWorkerStats } from './pool-stats.js';
export type { ClusterOptions } from './cluster-link.js';
