// How long a producer waits for a busy segment of its own to come back before making another
// (NOTE [Waiting for a segment]): the wait itself and its measured bound, per size class.
// The cache (segment-cache.ts) owns the busy list and asks this when a request of a large
// class finds nothing free.
//
// NOTE [Waiting for a segment]
// A large segment is expensive to make and cheap to wait for. Making one costs its creation
// (posix_fallocate zeroes every page, then the mapping) and then, on first touch, a page fault
// per 4 KiB page: on these VMs creating takes 7-12 ms at 16 MiB and 37-45 ms at 64 MiB, and
// the first fill of the fresh segment 13-16 ms and 55-65 ms more than a recycled one's (a
// recycled 16 MiB fill: under 1 ms). A producer that sends a large tensor and asks for the
// next one at once finds its last segment still in flight, and without waiting would make a
// second one; a consumer that drops what it gets gives it back within a message's round trip
// (tens of µs). So when a request of WAIT_MIN_BYTES or more finds no free segment but a busy
// one of its class, the thread blocks on that segment's refcount (a futex: the process that
// drops the count to 1 wakes it, NOTE [Reference slots] word 6) for at most what making a new
// one would cost, then makes one (the rent-or-buy rule: never worse than twice the best choice
// made knowing when the segment comes back; a consumer's garbage-collection pause of tens of
// ms is then waited out, not paid for with a new segment). What making one costs is measured,
// not assumed: every Segment.create() of a waiting class is timed, and the bound is the
// class's running average of that (createCost) times FRESH_PER_CREATE, the first touch's
// share, which the cache cannot time (the user's code does the touching) and which was
// 2.3-2.6x the creation here at 16 and 64 MiB (1.8x at 4 MiB); a machine where pages come
// cheaper (huge pages, a host without nested paging) gets a shorter bound by itself. Before
// a class has been made once there is nothing of it to wait for; the fallback for that case
// is FRESH_PAGE_US a page. Each wait in a row that runs out halves the next one's bound, for
// a second from the first of them: a consumer that is this very thread (which cannot give
// the segment back while we block) then costs at most twice the bound a second, and a
// consumer that was slow once soon gets the full bound back. Waiting serialises producer and
// consumer, which only pays when the fill dwarfs the round trip: hence the size floor. A
// class whose wait ran out (its consumer keeps what it gets, or is this very thread) is not
// waited for again until one of its busy segments is seen coming back.
import type { Segment } from './segment.js';
import { envNumber } from '../env.js';

/** Classes from this size wait for a busy segment (NOTE [Waiting for a segment]). */
export const WAIT_MIN_BYTES = 4 * 2 ** 20;
/** How long waits that ran out in a row keep shortening the next ones (NOTE [Waiting for a segment]). */
const RUN_OUT_WINDOW_MS = 1000;
/** What a fresh segment costs against its creation alone: creation, then first touch (NOTE [Waiting for a segment]). */
export const FRESH_PER_CREATE = 2.4;
/** A fresh page (creation and first touch) on the project's VMs: the bound for a class not yet timed. */
const FRESH_PAGE_US = 3.5;
/** Weight of the newest timing in a class's running average of Segment.create(). */
const CREATE_EWMA = 0.25;

export class SegmentWaits {
  /** Classes whose last wait ran out. */
  #noWait = new Set<number>();
  /** Waits in a row that ran out, per class, since when: each halves the next wait's bound, for RUN_OUT_WINDOW_MS. */
  #runOuts = new Map<number, { count: number; since: number }>();
  /** Running average of Segment.create() per waiting class, ms. */
  #createMs = new Map<number, number>();
  /** Counters for tests: requests that waited for a segment, waits that ran out. */
  waited = 0;
  runOut = 0;

  /** Whether a request of class `cls` that found no free segment waits for a busy one. */
  wants(cls: number): boolean {
    return cls >= WAIT_MIN_BYTES && !this.#noWait.has(cls);
  }

  /** Blocks until `segment`, busy and of class `cls`, comes back, within the bound; true if it did. */
  wait(cls: number, segment: Segment): boolean {
    const now = performance.now();
    let streak = this.#runOuts.get(cls);
    if (streak !== undefined && now - streak.since > RUN_OUT_WINDOW_MS) {
      this.#runOuts.delete(cls);
      streak = undefined;
    }
    if (!segment.waitFree(this.boundMs(cls) / 2 ** (streak?.count ?? 0))) {
      this.#noWait.add(cls);
      if (streak === undefined) this.#runOuts.set(cls, { count: 1, since: now });
      else streak.count = Math.min(streak.count + 1, 30);
      this.runOut++;
      return false;
    }
    this.#runOuts.delete(cls);
    this.waited++;
    return true;
  }

  /** A busy segment of class `cls` was seen coming back: the class is waited for again. */
  cameBack(cls: number): void {
    if (this.#noWait.size > 0) this.#noWait.delete(cls);
  }

  /** Makes a segment of class `cls` with `make`, timing it when the class is one that waits. */
  timeCreate(cls: number, make: () => Segment): Segment {
    if (cls < WAIT_MIN_BYTES) return make();
    const t0 = performance.now();
    const segment = make();
    const ms = performance.now() - t0;
    const avg = this.#createMs.get(cls);
    this.#createMs.set(cls, avg === undefined ? ms : avg + CREATE_EWMA * (ms - avg));
    return segment;
  }

  /** The running average of Segment.create() for class `cls`, ms; undefined until one is made (or below the waiting floor). */
  createCostMs(cls: number): number | undefined {
    return this.#createMs.get(cls);
  }

  /** How long a request of class `cls` waits for a busy segment: what a fresh one costs, or TENSORPROC_SEGMENT_WAIT_MS. */
  boundMs(cls: number): number {
    const env = envNumber('TENSORPROC_SEGMENT_WAIT_MS');
    if (env !== undefined) return env;
    const created = this.#createMs.get(cls);
    return created !== undefined ? created * FRESH_PER_CREATE : ((cls / 4096) * FRESH_PAGE_US) / 1000;
  }

  /** Nothing of any class is in flight any more (the cache was cleared): every class waits again. */
  clear(): void {
    this.#noWait.clear();
    this.#runOuts.clear();
  }
}
