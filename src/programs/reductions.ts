// Every reduction the library registers (NOTE [Message table]), loaded together: what a child
// needs before it decodes arguments that carry tensorproc objects, when its target may not
// have imported tensorproc itself (NOTE [Spawn arguments]). torch's multiprocessing calls
// init_reductions() on import for the same reason. A program loads this, never the index:
// nothing under src/ imports src/index.ts. Each module below registers its types when it
// is evaluated (static blocks); `npm test`'s import check (scripts/check-imports.mjs) fails
// when a module that calls registerReduction() is not reached from here.
import '../transport/index.js';
import '../queue/index.js';
import '../sync/index.js';
import '../workers/worker-port.js';
import '../pool/control-block.js';
import '../data/datasets/travel.js';
import '../sync-manager/index.js';
