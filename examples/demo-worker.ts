import type { Tensor } from 'tensorproc';

/** Runs in the child: t is the parent's memory, not a copy. */
export function scale(i: number, t: Tensor, factor: number): void {
  for (let r = 0; r < t.shape[0]!; r++) for (let c = 0; c < t.shape[1]!; c++) t.set([r, c], (t.get(r, c) as number) * factor);
  console.log(`  child ${i} (pid ${process.pid}) sees shared=${t.isShared()}, shape [${t.shape.join(', ')}]`);
}
