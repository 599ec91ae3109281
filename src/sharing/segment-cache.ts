// The per-process (per-thread) cache of segments this process created, by size class.
//
// NOTE [Segment recycling]
// Making a segment costs system calls (memfd_create/shm_open, fallocate, mmap) and a page
// fault per page on first touch; a tensor born in a recycled segment costs neither. When a
// lease ends (release(), or the garbage collector drops the last view), its segment comes
// back here. It may be reused only when its header refcount is 1, i.e. no other process
// holds it and no message carrying it is in flight (see NOTE [Segment lifetime]); until then
// it waits on the busy list, rechecked when its class is asked for. Both lists are bounded
// (the free lists by bytes and by count, as each segment holds a descriptor and a mapping):
// past the bound the oldest segments are dropped (unreferenced and unmapped), which for a
// busy one leaves its memory to its other holders.
// Reuse is last-in first-out: every acquire first moves the busy segments that became free
// onto the free lists, oldest first (the oldest while they are free; all of them when that
// leaves nothing of the class asked for), and then takes the most recently freed. The segment a
// producer gets is then the one it wrote last, still in the CPU's caches; a stream of 1 MiB
// tensors kept cycling through 64 segments (a queue's maxsize) instead writes to memory at
// a third of the speed (64 MiB does not fit a 16 MiB L3: measured 22 µs vs 80-115 µs a fill).
// A request of a large class that finds nothing free may wait for a busy segment of its class
// to come back instead (NOTE [Waiting for a segment], segment-wait.ts).
import { TooManyFilesError } from '../errors.js';
import { getSharingStrategy, type SharingStrategy } from './strategy.js';
import { Segment, type SpareLike } from './segment.js';
import { sizeClass } from './size-class.js';
import { debug, debugEnabled } from '../debug.js';
import { reclaimDeadHolders } from './dead-holders.js';
import { witnessIdle } from './witness.js';
import { segmentFree } from './in-flight.js';
import { dropEntry, type CacheEntry } from './cache-entry.js';
import { shedDescriptors } from './descriptors.js';
import { SegmentWaits } from './segment-wait.js';
import { ENV, envNumber } from '../env.js';

const MAX_BUSY = 1024;
/**
 * Free segments kept, whatever their size: each holds a descriptor (file_descriptor) and a
 * mapping, and small ones (empty tensors: class 0) would never reach the byte bound.
 */
const MAX_FREE = 1024;

function maxCachedBytes(): number {
  return envNumber('TENSORPROC_CACHE_BYTES') ?? ENV.TENSORPROC_CACHE_BYTES.default;
}

/** How often housekeeping() runs (allocator.ts), while anything is cached. */
export const HOUSEKEEPING_MS = 250;
/** A busy segment that only messages in flight have held for this long is let go (NOTE [Dead holders]). */
const IN_FLIGHT_ONLY_TICKS = 60_000 / HOUSEKEEPING_MS;
/** Free segments not reused for this many housekeeping ticks are given back (NOTE [Cache decay]). */
export const DECAY_TICKS = ((): number => {
  const ms = envNumber('TENSORPROC_CACHE_DECAY_MS') ?? ENV.TENSORPROC_CACHE_DECAY_MS.default;
  return Math.ceil(ms / HOUSEKEEPING_MS);
})();

export type { SpareLike } from './segment.js';
export { dropEntry, type CacheEntry } from './cache-entry.js';

// NOTE [Cache decay]
// Free segments not reused within TENSORPROC_CACHE_DECAY_MS (2 s) are given back, as an
// allocator returns memory it keeps after a while (jemalloc's decay): a stream reuses its
// segments within microseconds, and a process that stops sending should not keep hundreds
// of MiB and a descriptor per segment. A producer that pauses for longer pays a fresh
// segment after the pause (at most 30 ms at 64 MiB).

export class SegmentCache<S extends SpareLike = SpareLike> {
  // Free segments by strategy, then by class. Map iteration order is insertion order, so
  // the first class of a strategy is the one evicted first.
  #free: Record<SharingStrategy, Map<number, CacheEntry<S>[]>> = { file_descriptor: new Map(), file_system: new Map() };
  #busy: CacheEntry<S>[] = [];
  #freeBytes = 0;
  #freeCount = 0;
  #maxBytes = maxCachedBytes();
  // One-entry memo of sizeClass(): a stream of tensors is usually one size.
  #lastBytes = -1;
  #lastClass = 0;
  /** NOTE [Waiting for a segment]: whether, and how long, a large request waits for a busy segment. */
  readonly waits = new SegmentWaits();
  #sinceFullPass = 0;
  #tick = 0;
  /** Counters for tests: segments made, dead holders' references taken back. */
  created = 0;
  reclaimed = 0;

  /** A segment of this process with room for `nbytes`, refcount 1: recycled when possible. */
  acquire(nbytes: number, strategy: SharingStrategy = getSharingStrategy()): CacheEntry<S> {
    const cls = nbytes === this.#lastBytes ? this.#lastClass : sizeClass(nbytes);
    this.#lastBytes = nbytes;
    this.#lastClass = cls;
    // A full pass when the oldest busy segments left nothing of the class asked for, and now
    // and then even when they did: others that came back behind a segment held for long must
    // reach the free lists, where the byte bound applies. Once per as many requests as there
    // are busy segments: O(1) a request.
    const free = this.#free[strategy];
    if (this.#busy.length > 0 && !this.#promoteOldest()) {
      const cached = free.get(cls);
      if (++this.#sinceFullPass >= this.#busy.length || cached === undefined || cached.length === 0) this.#promoteBusy();
    }
    const list = free.get(cls);
    if (list !== undefined && list.length > 0) {
      const entry = list.pop()!;
      this.#freeBytes -= entry.segment.capacity;
      this.#freeCount--;
      if (debugEnabled) debug('segment recycled: %s, %d bytes', strategy, cls);
      return entry;
    }
    if (this.waits.wants(cls)) {
      const entry = this.#waitForBusy(cls, strategy);
      if (entry !== null) {
        if (debugEnabled) debug('segment recycled after waiting for it to come back: %s, %d bytes', strategy, cls);
        return entry;
      }
    }
    this.created++;
    const segment = this.waits.timeCreate(cls, () => {
      try {
        return Segment.create(strategy, cls);
      } catch (e) {
        // Out of descriptors: what is kept for reuse goes first (NOTE [Kept descriptors]).
        if (!(e instanceof TooManyFilesError) || shedDescriptors() === 0) throw e;
        return Segment.create(strategy, cls);
      }
    });
    return { segment, spare: null, fresh: true };
  }

  /** The oldest busy segment of the class once it is free, or null if there is none or it did not come back in time. */
  #waitForBusy(cls: number, strategy: SharingStrategy): CacheEntry<S> | null {
    const busy = this.#busy;
    const i = busy.findIndex((e) => e.segment.capacity === cls && e.segment.strategy === strategy && e.checkBuffers !== true);
    if (i < 0 || !this.waits.wait(cls, busy[i]!.segment)) return null;
    const entry = busy.splice(i, 1)[0]!; // the wait blocked this thread: nothing moved in the list meanwhile
    segmentFree(entry.segment); // NOTE [Orphans in flight]
    return entry;
  }

  /** A segment whose lease ended in this process. */
  give(seg: Segment, spare: S | null = null, checkBuffers = false): void {
    const entry: CacheEntry<S> = { segment: seg, spare, checkBuffers };
    if (!this.#isFree(entry)) {
      this.#busy.push(entry);
      if (this.#busy.length > MAX_BUSY) dropEntry(this.#busy.shift()!);
      return;
    }
    this.#makeFree(entry);
  }

  #makeFree(entry: CacheEntry<S>): void {
    const seg = entry.segment;
    segmentFree(seg); // NOTE [Orphans in flight]: the probe's descriptor is the one sent now
    entry.tick = this.#tick;
    const byClass = this.#free[seg.strategy];
    let list = byClass.get(seg.capacity);
    if (list === undefined) byClass.set(seg.capacity, (list = []));
    list.push(entry);
    this.#freeBytes += seg.capacity;
    this.#freeCount++;
    if (this.#freeBytes > this.#maxBytes || this.#freeCount > MAX_FREE) this.#trim();
  }

  /** Drops every cached segment (process exit, emptyCache(), tests). Returns how many held a descriptor. */
  clear(): number {
    // What dead holders held first (NOTE [Dead holders]): dropping a busy segment then
    // removes its name here and now, where a holder killed since the last housekeeping
    // would leave it to the manager, which may not know that holder held it.
    if (this.#busy.length > 0) this.reclaimDead();
    let fds = 0;
    for (const byClass of Object.values(this.#free)) {
      for (const list of byClass.values()) {
        for (const e of list) {
          if (e.segment.fd !== null) fds++;
          dropEntry(e);
        }
      }
      byClass.clear();
    }
    this.#freeBytes = 0;
    this.#freeCount = 0;
    for (const e of this.#busy) {
      if (e.segment.fd !== null) fds++;
      dropEntry(e);
    }
    this.#busy = [];
    this.waits.clear(); // nothing of any class is in flight from here any more
    return fds;
  }

  /** Whether anything is cached (free or busy): housekeeping() has work. */
  get idle(): boolean {
    return this.#busy.length === 0 && this.#freeCount === 0;
  }

  /**
   * Every HOUSEKEEPING_MS while anything is cached: takes back what dead holders of busy
   * segments held, lets go of those held only in flight for long (NOTE [Dead holders]), and
   * gives back free segments not reused lately (NOTE [Cache decay]).
   */
  housekeeping(): void {
    const tick = ++this.#tick;
    if (this.#busy.length > 0) {
      this.reclaimDead();
      // Busy segments that came back (the manager may have taken back a dead holder's
      // references itself) reach the free lists, and their decay, without waiting for a request.
      this.#promoteBusy();
    }
    // NOTE [Witnesses of named segments]: no descriptor kept for it while nothing is to settle.
    if (!this.#busy.some((e) => e.segment.name !== null)) witnessIdle();
    if (this.#freeCount === 0) return;
    for (const byClass of Object.values(this.#free)) {
      for (const [cls, list] of byClass) {
        let n = 0;
        while (n < list.length && tick - list[n]!.tick! > DECAY_TICKS) n++; // oldest first
        if (n === 0) continue;
        for (const e of list.splice(0, n)) {
          this.#freeBytes -= e.segment.capacity;
          this.#freeCount--;
          dropEntry(e);
        }
        if (list.length === 0) byClass.delete(cls);
      }
    }
  }

  /** NOTE [Dead holders]: takes back what dead holders of busy segments held; true if it took any. */
  reclaimDead(): boolean {
    const { changed, took } = reclaimDeadHolders(this.#busy, this.#tick, IN_FLIGHT_ONLY_TICKS);
    this.reclaimed += took;
    return changed;
  }

  get freeBytes(): number {
    return this.#freeBytes;
  }

  /**
   * Free everywhere: no other process holds it, no message carries it, and, when the lease
   * may have left a buffer alive (moved to another thread, or collected but not yet swept),
   * no such buffer is left.
   */
  #isFree(entry: CacheEntry<S>): boolean {
    return entry.segment.refcount() === 1 && (entry.checkBuffers !== true || entry.segment.liveBuffers() === 0);
  }

  /**
   * Moves the oldest busy segments to the free lists while they are free, and stops at the
   * first that is not. Segments usually come back in the order they were sent (one consumer,
   * or several taking turns), so this finds what came back at the cost of one look more, where
   * a full pass would look at every segment in flight (a queue's maxsize of them) per request.
   * True when no busy segment is left.
   */
  #promoteOldest(): boolean {
    const busy = this.#busy;
    let n = 0;
    while (n < busy.length && this.#isFree(busy[n]!)) this.#promote(busy[n++]!);
    if (n > 0) busy.splice(0, n);
    return busy.length === 0;
  }

  #promote(entry: CacheEntry<S>): void {
    this.#makeFree(entry);
    this.waits.cameBack(entry.segment.capacity);
  }

  /**
   * Moves every busy segment nobody else holds any more to the free lists, oldest first: when
   * #promoteOldest() found nothing of the class asked for (the oldest is held for long, or
   * segments came back out of order).
   */
  #promoteBusy(): void {
    this.#sinceFullPass = 0;
    let kept = 0;
    const busy = this.#busy;
    for (let i = 0; i < busy.length; i++) {
      const entry = busy[i]!;
      if (this.#isFree(entry)) {
        this.#promote(entry);
      } else {
        busy[kept++] = entry;
      }
    }
    busy.length = kept;
  }

  #trim(): void {
    const over = (): boolean => this.#freeBytes > this.#maxBytes || this.#freeCount > MAX_FREE;
    for (const byClass of Object.values(this.#free)) {
      for (const [cls, list] of byClass) {
        while (list.length > 0 && over()) {
          const entry = list.shift()!;
          this.#freeBytes -= entry.segment.capacity;
          this.#freeCount--;
          dropEntry(entry);
        }
        if (list.length === 0) byClass.delete(cls);
        if (!over()) return;
      }
    }
  }

  /** Busy segments: ended here, still held elsewhere or in flight (tests). */
  busySegments(): Segment[] {
    return this.#busy.map((e) => e.segment);
  }

  /** Free segments kept (tests). */
  get freeCount(): number {
    return this.#freeCount;
  }

  /** Segments whose lease here ended while others hold them (mp.memoryStats()). */
  get busyCount(): number {
    return this.#busy.length;
  }
}
