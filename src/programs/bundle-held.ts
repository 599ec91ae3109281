// What the package bundle holds for the files beside it (NOTE [The package bundle],
// scripts/bundle-library.mjs): the programs (src/programs/) that the bundle's stub files hand
// to Node by URL, and the modules the process bootstrap imports on some paths. Part of the
// bundle's entry, with the public API; compiled on its own (tsc), it is never imported by
// the unbundled library, which has those programs as files of their own.
import { main as dataWorkerMain } from '../data/worker-main.js';
import { main as poolWorkerMain } from '../pool/worker-main.js';
import { main as syncManagerMain } from '../sync-manager/server-main.js';
import { threadChildMain } from '../process/thread-main.js';
import * as transport from '../transport/index.js';
import * as errorPayload from '../process/error-payload.js';
import * as fds from '../native/fds.js';
import { emptyCache } from '../sharing/index.js';

const programs = {
  'pool-worker': { main: poolWorkerMain },
  'data-worker': { main: dataWorkerMain },
  'sync-manager': { main: syncManagerMain },
  // The bundle holds every reduction already: nothing more to load for the arguments.
  'thread-child': { run: (entry: string) => threadChildMain(entry, async () => undefined) },
};

/**
 * On globalThis, so the bundle exports only the public API. emptyCache: for
 * test/helpers/leaks.ts, in a test process that loaded both copies.
 */
const KEY = Symbol.for('tensorproc.bundle');
(globalThis as Record<symbol, unknown>)[KEY] = { programs, transport, errorPayload, fds, emptyCache };
