// The package bundle's entry (NOTE [The package bundle], src/bundle-library.mjs): the public
// API, and the worker and thread mains that the bundle's stub files hand to Node by URL.
// Compiled on its own (tsc), it is never imported: the unbundled library has those mains as
// files of their own.
import { main as dataWorkerMain } from './data/worker-main.js';
import { main as poolWorkerMain } from './pool/pool-worker.js';
import { threadChildMain } from './process/thread-main.js';
import * as transport from './transport/index.js';
import * as errorPayload from './process/error-payload.js';
import * as fds from './native/fds.js';
import { emptyCache } from './sharing/index.js';

export * from './index.js';
// Again here: errors.js stays a file of its own, and esbuild keeps `export *` of such a file
// only in the entry itself (index.ts's own line is dropped from the bundle).
export * from './errors.js';

/**
 * Where the stubs find what they re-export: on globalThis, so the bundle exports only the
 * public API. emptyCache: for test/helpers/leaks.ts, in a test process that loaded both copies.
 */
const KEY = Symbol.for('tensorproc.bundle');
(globalThis as Record<symbol, unknown>)[KEY] = { dataWorkerMain, poolWorkerMain, threadChildMain, transport, errorPayload, fds, emptyCache };
