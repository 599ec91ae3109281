// Mappings of received segments that this process no longer uses, kept so that the same
// segment arriving again (a producer recycles its segments: NOTE [Segment recycling]) costs
// no mmap and no page faults.
//
// A parked segment holds no reference in its header: the producer may reuse it at once, and
// nothing here delays that. What parking does hold is the mapping, which for a memfd keeps
// the memory alive after its producer dropped it; the bounds below keep that small.
import type { Segment } from './segment.js';

const MAX_SEGMENTS = 64;
const MAX_BYTES = 256 * 2 ** 20;

export class ReceiveCache {
  // Insertion order = least recently parked first.
  #parked = new Map<string, Segment>();
  #bytes = 0;

  /** A parked mapping of the segment with this key, taken out of the cache, or undefined. */
  take(key: string): Segment | undefined {
    const seg = this.#parked.get(key);
    if (seg !== undefined) {
      this.#parked.delete(key);
      this.#bytes -= seg.capacity;
    }
    return seg;
  }

  /** Keeps a segment whose reference this process has already dropped. */
  park(seg: Segment): void {
    const old = this.#parked.get(seg.key);
    if (old !== undefined && old !== seg) {
      this.#parked.delete(seg.key);
      this.#bytes -= old.capacity;
      old.unmap();
    }
    this.#parked.set(seg.key, seg);
    this.#bytes += seg.capacity;
    for (const [key, s] of this.#parked) {
      if (this.#parked.size <= MAX_SEGMENTS && this.#bytes <= MAX_BYTES) break;
      this.#parked.delete(key);
      this.#bytes -= s.capacity;
      s.unmap();
    }
  }

  clear(): void {
    for (const s of this.#parked.values()) s.unmap();
    this.#parked.clear();
    this.#bytes = 0;
  }

  get size(): number {
    return this.#parked.size;
  }
}
