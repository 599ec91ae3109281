// tensorproc/cluster: the Pool, the DataLoader and a Queue past one host, on NATS (docs/cluster.md).
// An entry of its own (package.json "exports"): the core never imports it; `new Pool({ cluster })`
// and `new DataLoader(target, { cluster })` load it when asked (workers/cluster-entry.ts).
export { createRemotePool } from './pool-head.js';
export { placeLoaderWorkers } from './loader-head.js';
/** Internal: the initializer of the head's own-host workers (NOTE [Same-host slots]). */
export { hostInit } from './pool-local.js';
export { Agent, runAgent } from './agent-main.js';
export type { AgentOptions } from './agent-main.js';
export type { ClusterOptions } from './connect.js';
export { Queue } from './queue.js';
export type { QueueOptions, GetOptions, PutOptions, Held } from './queue.js';
