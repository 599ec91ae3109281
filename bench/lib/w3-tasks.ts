// W3's task functions (shared/YARDSTICK.md), the same as the torch anchor's: a tiny task
// (x -> x * x) and one that returns a fresh 1 MiB float32 tensor, filled. Workers import
// this module; so does piscina's anchor, for its threads. freshLimit is the 1 MiB case's
// limit (bench/pool.ts).
import { empty, emptyCache, type Event as MpEvent, type Tensor } from '../../src/index.js';

export function square(x: number): number {
  return x * x;
}

export function freshTensor(i: number): Tensor {
  const t = empty([1 << 18], { shared: true });
  t.fill(i);
  return t;
}

/**
 * The 1 MiB case's limit: `n` fresh 1 MiB shared tensors made and filled in this process and
 * held, as a map's results are held until it returns; [seconds, pid]. Nothing is sent. The
 * cache is emptied before and after, so that every trial's segments are fresh.
 */
export function freshLimit(n: number): [number, number] {
  emptyCache();
  const held: Tensor[] = [];
  const t0 = performance.now();
  for (let i = 0; i < n; i++) {
    const t = empty([1 << 18], { shared: true });
    t.fill(i);
    held.push(t);
  }
  const seconds = (performance.now() - t0) / 1000;
  for (const t of held) t.release();
  emptyCache();
  return [seconds, process.pid];
}

/** W3 mixed's short task: about `ms` of CPU (a spin on the clock, as the CPython anchor's). */
export function spin(x: number, ms = 1): number {
  const end = performance.now() + ms;
  while (performance.now() < end);
  return x;
}

/**
 * W3 mixed's long task: keeps its worker busy on the CPU until `release` is set or `ms` pass;
 * `started` is set once it runs. The bench releases it as soon as the short tasks are timed,
 * rather than waiting out its 3 s each time.
 */
export function hold(started: MpEvent, release: MpEvent, ms: number): number {
  started.set();
  const end = performance.now() + ms;
  while (!release.isSet() && performance.now() < end);
  return ms;
}
