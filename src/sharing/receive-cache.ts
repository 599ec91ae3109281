// Mappings of received segments that this process no longer uses, kept so that the same
// segment arriving again (a producer recycles its segments: NOTE [Segment recycling]) costs
// no mmap and no page faults.
//
// A parked segment holds no reference in its header: the producer may reuse it at once, and
// nothing here delays that. What parking does hold is the mapping, which for a memfd keeps
// the memory alive after its producer dropped it; the bounds below keep that small.
import { addon } from '../native/index.js';
import type { Segment } from './segment.js';
import type { CacheEntry, SpareLike } from './segment-cache.js';

/** Lets go of a parked mapping: its spare buffer, which no user saw, first (Segment.unmap()). */
function unmapEntry(entry: CacheEntry<SpareLike>): void {
  if (entry.spare !== null) addon.detach(entry.spare.buffer);
  entry.segment.unmap();
}

// A producer that keeps a bounded queue full cycles through about maxsize + 2 segments (torch
// and the W1 yardstick use maxsize 64): fewer parked mappings than that and every message
// misses (an mmap and a munmap each). Small segments cost little to keep; MAX_BYTES bounds
// the memory.
const MAX_SEGMENTS = 1024;
const MAX_BYTES = 256 * 2 ** 20;

export class ReceiveCache<S extends SpareLike = SpareLike> {
  // Insertion order = least recently parked first.
  #parked = new Map<string, CacheEntry<S>>();
  #bytes = 0;
  #tick = 0;

  /** A parked mapping of the segment with this key, taken out of the cache, or undefined. */
  take(key: string): CacheEntry<S> | undefined {
    const entry = this.#parked.get(key);
    if (entry !== undefined) {
      this.#parked.delete(key);
      this.#bytes -= entry.segment.capacity;
    }
    return entry;
  }

  /** Keeps a segment whose reference this process has already dropped. */
  park(seg: Segment, spare: S | null = null): void {
    const old = this.#parked.get(seg.key);
    if (old !== undefined) {
      this.#parked.delete(seg.key);
      this.#bytes -= old.segment.capacity;
      if (old.segment !== seg) unmapEntry(old);
    }
    this.#parked.set(seg.key, { segment: seg, spare, tick: this.#tick });
    this.#bytes += seg.capacity;
    for (const [key, e] of this.#parked) {
      if (this.#parked.size <= MAX_SEGMENTS && this.#bytes <= MAX_BYTES) break;
      this.#parked.delete(key);
      this.#bytes -= e.segment.capacity;
      unmapEntry(e);
    }
  }

  /**
   * Housekeeping (allocator.ts): mappings not taken again within `decayTicks` ticks go, as the
   * owner's free segments do (NOTE [Cache decay]): a parked mapping keeps a memfd's memory
   * alive after its owner gave the segment up.
   */
  housekeeping(decayTicks: number): void {
    const tick = ++this.#tick;
    for (const [key, e] of this.#parked) {
      if (tick - e.tick! <= decayTicks) break; // parked in order: the rest are younger
      this.#parked.delete(key);
      this.#bytes -= e.segment.capacity;
      unmapEntry(e);
    }
  }

  clear(): void {
    for (const e of this.#parked.values()) unmapEntry(e);
    this.#parked.clear();
    this.#bytes = 0;
  }

  get size(): number {
    return this.#parked.size;
  }

  /** Data bytes of the parked mappings (mp.memoryStats()). */
  get bytes(): number {
    return this.#bytes;
  }
}
