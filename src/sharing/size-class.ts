// Size classes for recycled segments: a segment of class c serves every request up to c.
// Classes are page multiples spaced a quarter-power of two apart (2^k, 1.25·2^k, 1.5·2^k,
// 1.75·2^k), so a request wastes at most 25% and a steady stream of one size always hits.
import { HEADER_BYTES } from './segment-header.js';

const PAGE = 4096;

/** The data capacity of the class that serves `nbytes` (header included in the page math). */
export function sizeClass(nbytes: number): number {
  const total = Math.max(PAGE, nbytes + HEADER_BYTES);
  let cls: number;
  if (total <= 4 * PAGE) {
    cls = Math.ceil(total / PAGE) * PAGE;
  } else {
    const base = 2 ** Math.floor(Math.log2(total));
    const quarter = base / 4;
    cls = base + Math.ceil((total - base) / quarter) * quarter;
  }
  return cls - HEADER_BYTES;
}
