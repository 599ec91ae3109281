// How a contiguous run of elements is filled with one value.
//
// NOTE [Streaming fill]
// Ordinary stores (TypedArray.prototype.fill) first read every cache line they write
// (read-for-ownership), so filling memory that is not in the cache moves every byte twice
// across the memory bus. Streaming (non-temporal) stores write whole lines straight to
// memory: on this project's 2-core machines they fill 64 MiB at ~23 GB/s against ~13.5 GB/s.
// But they also bypass the cache, so for a buffer that fits in it (and is hot, as a recycled
// segment is: NOTE [Shared allocation]) ordinary stores are faster (~55 GB/s at 1 MiB). The
// rule is therefore the size: a run at least as large as the last-level cache cannot stay in
// it, and is streamed; anything smaller is filled by V8. glibc's memset makes the same choice.
// TENSORPROC_STREAM_FILL_BYTES overrides the threshold (0 streams everything, Infinity nothing).
import { readdirSync, readFileSync } from 'node:fs';
import { addon } from '../native/index.js';
import type { DTypeInfo, TypedArray } from './dtype.js';

const DEFAULT_THRESHOLD = 16 << 20; // when the system does not say how large its cache is

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
  const env = process.env.TENSORPROC_STREAM_FILL_BYTES;
  if (env !== undefined && env !== '' && Number(env) >= 0) return Number(env);
  const llc = lastLevelCacheBytes();
  return llc > 0 ? llc : DEFAULT_THRESHOLD;
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
