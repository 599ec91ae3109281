// How a contiguous run of elements is filled with one value.
//
// NOTE [Streaming fill]
// Ordinary stores (TypedArray.prototype.fill) first read every cache line they write
// (read-for-ownership), so filling memory that is not in the cache moves every byte twice
// across the memory bus. Streaming (non-temporal) stores write whole lines straight to
// memory: on this project's 2-core machines they fill 64 MiB at ~23 GB/s against ~13.5 GB/s.
// But they also bypass the cache, so for a buffer that fits in it (and is hot, as a recycled
// segment is: NOTE [Shared allocation]) ordinary stores are faster (~55 GB/s at 1 MiB). The
// rule is therefore the size: a run of a quarter of the last-level cache or more is streamed;
// anything smaller is filled by V8. A quarter, not the whole cache, as glibc's memset has
// chosen since 2.38 (non_temporal_threshold ~ L3 / 4): the last-level cache is shared with
// the other cores, the kernel and, in a VM, other guests, so a buffer half its size is not hot
// when it is filled again, least of all a segment that went to a consumer process and came
// back. Measured on the project's 2-core VMs (32 MiB L3 in sysfs), a recycled segment filled
// back to back / after other work evicted it: 4 MiB 0.20 / 0.62 ms with ordinary stores,
// 0.22 / 0.32 ms streamed; 8 MiB 0.54 / 1.36 against 0.47 / 0.62; 16 MiB 1.6-2.4 / 2.4-2.7
// against 0.86 / 1.4. W1 at 16 MiB (the producer fills a segment its consumer just gave
// back) went from 281-323 to 524-761 messages/s; at 2 MiB ordinary stores still win when hot
// (0.07 against 0.11 ms).
// The quarter is capped at 16 MiB (MAX_THRESHOLD). A VM on a large server sees the socket's
// whole L3 in sysfs: 105 MiB on the project's VMs of 2026-12-02 (a quarter: 26 MiB), of which a
// guest among many keeps little across a handoff. There, a 16 MiB fill back to back takes
// 0.95 ms with ordinary stores, but 1.1-2 ms after a pause of only 100 µs, and 2 ms from
// memory (2.1 GB/s less than streamed): W1 at 16 MiB ran 589 and 647 messages/s ordinary,
// 772 and 804 streamed (medians of 4 runs), the back-to-back loop 1,082 / 1,057 fills/s
// against 974 / 938; at 4 and 8 MiB ordinary stores still won W1 (2,597 vs 2,316 and 1,433 vs
// 1,326 messages/s), so the cap sits at 16 MiB, not lower.
// TENSORPROC_STREAM_FILL_BYTES overrides the threshold (0 streams everything, Infinity nothing).
import { readdirSync, readFileSync } from 'node:fs';
import { addon } from '../native/index.js';
import type { DTypeInfo, TypedArray } from './dtype.js';
import { envNumber } from '../env.js';

const DEFAULT_THRESHOLD = 4 << 20; // when the system does not say how large its cache is (a quarter of 16 MiB)
/** A quarter of a VM's view of a socket's cache overstates what it keeps (NOTE [Streaming fill]). */
const MAX_THRESHOLD = 16 << 20;

/**
 * The largest cache of CPU 0 as the kernel describes it (sysfs). Not sysconf: glibc asks
 * CPUID, which in a VM on a large EPYC reports the whole socket's L3 (256 MiB here) rather
 * than the 16 MiB this guest can actually use.
 */
function lastLevelCacheBytes(): number {
  let best = 0;
  const dir = '/sys/devices/system/cpu/cpu0/cache';
  let entries: string[];
  try {
    entries = readdirSync(dir).filter((e) => e.startsWith('index'));
  } catch {
    return 0;
  }
  for (const e of entries) {
    try {
      const m = /^(\d+)([KMG]?)/.exec(readFileSync(`${dir}/${e}/size`, 'latin1').trim());
      if (m === null) continue;
      const bytes = Number(m[1]) * ({ '': 1, K: 1024, M: 1 << 20, G: 1 << 30 } as Record<string, number>)[m[2]!]!;
      if (bytes > best) best = bytes;
    } catch {
      // an entry without a size: skip it
    }
  }
  return best;
}

function threshold(): number {
  const env = envNumber('TENSORPROC_STREAM_FILL_BYTES');
  if (env !== undefined) return env;
  const llc = lastLevelCacheBytes();
  return llc > 0 ? Math.min(llc / 4, MAX_THRESHOLD) : DEFAULT_THRESHOLD;
}

let streamFrom: number | null = null;
/** Fills that went through streaming stores (tests check that the path was taken). */
export const fillStats = { streamed: 0 };
const pattern = new Uint8Array(16);

/** Fills elements [start, end) of `all`, whose elements are `info`'s, with `raw`. */
export function fillRun(all: TypedArray, info: DTypeInfo, raw: number | bigint, start: number, end: number): void {
  streamFrom ??= threshold();
  if ((end - start) * info.itemsize >= streamFrom && end > start) {
    (new info.array(pattern.buffer) as unknown as { fill(v: number | bigint): void }).fill(raw);
    addon.streamFill(all.subarray(start, end), pattern);
    fillStats.streamed++;
    return;
  }
  (all as unknown as { fill(v: number | bigint, s: number, e: number): void }).fill(raw, start, end);
}
