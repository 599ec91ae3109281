// The glibc settings DataLoader process workers start with (GLIBC_TUNABLES), for the two
// costs of a worker's batch that glibc's defaults make larger: its heap (NOTE [Worker
// malloc]) and its copies into the batch (NOTE [Streaming copies]). Other libcs ignore the
// variable. Thread workers share this process's libc and its settings.
//
// NOTE [Worker malloc]
// A dataset's samples are private tensors (ArrayBuffers, malloc'd by V8 through calloc) that
// become garbage as soon as collate has copied them, but are freed only when the garbage
// collector runs, a burst of megabytes at a time. glibc's default heap policy then gives the
// freed top of the heap back to the kernel at each burst (its trim threshold follows the
// mmap threshold, about twice the largest chunk freed), so the next samples fault in fresh
// zeroed pages: measured on W4's dataset, 32 samples of 3x224x224 float32 cost 12-14 ms to
// make and fill with the defaults, 3-5 ms with the heap kept. torch frees each sample as its
// last reference goes, so glibc's defaults serve it well. Process workers therefore start
// with GLIBC_TUNABLES keeping up to TRIM_MB of free heap and serving chunks below MMAP_MB from
// it; a user whose GLIBC_TUNABLES already sets a malloc tunable keeps exactly theirs.
//
// NOTE [Streaming copies]
// Default collate copies each sample into its row of the batch (NOTE [Collating as samples
// come]): TypedArray.prototype.set, that is glibc's memmove. Below its non-temporal threshold
// (by default three quarters of the last-level cache a thread's share, megabytes) memmove
// uses ordinary stores, which first read each line of the destination from memory and leave
// it in the cache; a batch (W4's: 18 MiB) is larger than the cache and is read next by
// another process, so both are wasted. Above the threshold memmove streams the rows straight
// to memory. Process workers start with the threshold at STREAM_KB (half a core's L2 on
// these machines: a copy that large evicts most of what the cache held anyway): measured
// on W4's rows (588 KiB from a sample still in the cache into a recycled segment), 32 of
// them 3.5 ms with the default threshold against 1.1 ms streamed, and a worker's whole batch
// 8.5 ms of CPU against 6.8 (medians of 5, the 2-core machine under load). A user's own
// x86_non_temporal_threshold is kept.
const MMAP_MB = 32; // glibc's own ceiling for its dynamic threshold on 64-bit
const TRIM_MB = 128;
const STREAM_KB = 512;
const MALLOC = `glibc.malloc.mmap_threshold=${MMAP_MB << 20}:glibc.malloc.trim_threshold=${TRIM_MB << 20}`;
const STREAM = `glibc.cpu.x86_non_temporal_threshold=${STREAM_KB << 10}`;

/** GLIBC_TUNABLES for a worker, given this process's (undefined: unset). */
export function workerTunables(own: string | undefined): string {
  const add: string[] = [];
  if (own === undefined || !own.includes('glibc.malloc.')) add.push(MALLOC);
  if (own === undefined || !own.includes('glibc.cpu.x86_non_temporal_threshold')) add.push(STREAM);
  return [...(own ? [own] : []), ...add].join(':');
}

/** Runs `start` (which starts worker processes synchronously) with workerTunables() in the environment. */
export function withWorkerTunables<T>(start: () => T): T {
  const saved = process.env.GLIBC_TUNABLES;
  process.env.GLIBC_TUNABLES = workerTunables(saved);
  try {
    return start();
  } finally {
    if (saved === undefined) delete process.env.GLIBC_TUNABLES;
    else process.env.GLIBC_TUNABLES = saved;
  }
}
