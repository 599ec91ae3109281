// The DataLoader's worker: the module a worker child loads by path (data/workers.ts names it),
// whose `main` the worker set calls. Its loop is data/worker-main.ts.
export { main } from '../data/worker-main.js';
