// W3's task functions (shared/YARDSTICK.md), the same as the torch anchor's: a tiny task
// (x -> x * x) and one that returns a fresh 1 MiB float32 tensor, filled. Workers import
// this module; so does piscina's anchor, for its threads.
import { empty, type Tensor } from '../../src/index.js';

export function square(x: number): number {
  return x * x;
}

export function freshTensor(i: number): Tensor {
  const t = empty([1 << 18], { shared: true });
  t.fill(i);
  return t;
}
