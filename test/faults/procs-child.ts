// A process child for procs.test.ts: says it runs, then waits to be let go.
import type * as mp from '../../src/index.js';

export default async function (_i: number, ready: mp.Event, release: mp.Event): Promise<void> {
  ready.set();
  await release.wait();
  ready.close();
  release.close();
}
