// The Pool's worker: the module a worker child loads by path (pool/worker-lives.ts names it),
// whose `main` the worker set calls. Its loop is pool/worker-main.ts.
export { main } from '../pool/worker-main.js';
