// W1's two children (bench/queue.ts): one target, index 0 consumes, index 1 produces. Imports
// the package and nothing else, so that a child holds what a user's would.
import * as mp from 'tensorproc';

export async function role(
  i: number,
  q: mp.Queue<mp.Tensor>,
  out: mp.Queue,
  size: number,
  count: number,
  strategy: mp.SharingStrategy,
): Promise<void> {
  mp.setSharingStrategy(strategy);
  const n = size / 4;
  if (i === 1) {
    for (let k = 0; k < count; k++) {
      const t = mp.empty([n], { shared: true });
      t.fill(k); // a real producer writes the whole tensor
      await q.put(t);
      t.release(); // the producer's `del t`
    }
    return;
  }
  let x = await q.get();
  let s = (x.get(0) as number) + (x.get(n - 1) as number);
  x.release();
  const t0 = performance.now();
  for (let k = 1; k < count; k++) {
    x = await q.get();
    s += (x.get(0) as number) + (x.get(n - 1) as number);
    x.release();
  }
  await out.put({ dt: (performance.now() - t0) / 1000, s });
}
