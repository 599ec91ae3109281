// Sync objects have no release(): they go back when collected. A child handle lets go of its
// spawn arguments a moment after join() (its exit and the close of its pipes are separate
// events), so the objects a test passed to children may still be reachable when the leak
// check's first collection runs. settleBeforeLeakCheck() registers, ahead of checkLeaks(), an
// after-hook that collects until this process's named segments are gone (bounded: a real leak
// still fails the leak check).
import { after } from 'node:test';
import { collectGarbage, shmSegments } from '../helpers/leaks.js';
import { emptyCache } from '../../src/index.js';

export function settleBeforeLeakCheck(): void {
  after(async () => {
    const mine = () => shmSegments().some((n) => n.startsWith(`tensorproc_${process.pid}_`));
    for (let k = 0; k < 50 && mine(); k++) {
      await new Promise((r) => setTimeout(r, 10));
      await collectGarbage();
      emptyCache();
    }
  });
}
