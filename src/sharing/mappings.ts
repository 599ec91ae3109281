// How many segments this thread maps, against the kernel's limit on a process's mappings.
//
// NOTE [Mapping budget]
// Every segment a process maps, made or received, is one memory mapping (a VMA), and the
// kernel gives a process at most vm.max_map_count of them (65,530 by default), shared with
// everything else it maps: V8 maps its heap in pages of 256 KiB, malloc its arenas, and
// threads their stacks. A process that took the last ones for segments did not get an
// error from tensorproc: the next allocation of V8 failed, and Node died with "FATAL ERROR:
// ... process out of memory" (100,000 received tensors of 64 bytes, each its own segment;
// under file_system the failed mmap read as "shared memory is full"). So the segments are
// counted (the count is cheap: one increment per map, one decrement per unmap), and once
// they are many the process's real count of mappings is read from /proc/self/maps (tens of
// milliseconds at 60,000, so only at points that halve the room left each time). A segment
// that would leave fewer than RESERVE mappings for the rest is refused with
// TooManyMappingsError (ERR_TP_TOO_MANY_MAPPINGS), after the mappings kept for reuse only
// (the segment caches) are given up; a receive checks before it takes a message, so that
// the message waits for a later one (Endpoint.receiveNow), as out of descriptors.
// Counted per thread (module state): a thread child's segments are seen by the real count.
// Small storages share segments (NOTE [Packed small storages], packing.ts), so the bound
// applies to storages above PACK_BYTES, and to slabs.
import { readFileSync } from 'node:fs';
import { TooManyMappingsError } from '../errors.js';
import { envNumber } from '../env.js';

/** Mappings left to the rest of the process: V8's heap alone takes one per 256 KiB (1 GiB). */
const RESERVE = 4096;

function readMaxMapCount(): number {
  // TENSORPROC_MAX_MAPS: a lower bound to stay under, for a process that leaves room for
  // native libraries of its own (and for the tests, which cannot lower the kernel's).
  const env = envNumber('TENSORPROC_MAX_MAPS', (n) => Number.isSafeInteger(n) && n > 0);
  if (env !== undefined) return env;
  try {
    const n = Number(readFileSync('/proc/sys/vm/max_map_count', 'utf8').trim());
    return Number.isSafeInteger(n) && n > 0 ? n : 65_530;
  } catch {
    return 65_530; // the kernel's default (DEFAULT_MAX_MAP_COUNT)
  }
}

const maxMapCount = readMaxMapCount();
let mapped = 0;
// The first real count is read when the segments alone would take half of what is allowed.
let checkAt = Math.floor((maxMapCount - RESERVE) / 2);

/** This process's mappings now, as the kernel counts them (one line of /proc/self/maps each). */
function processMappings(): number {
  try {
    const maps = readFileSync('/proc/self/maps');
    let lines = 0;
    for (let i = maps.indexOf(10); i >= 0; i = maps.indexOf(10, i + 1)) lines++;
    return lines;
  } catch {
    return mapped; // no procfs: the segments are all that can be counted
  }
}

const shedders: (() => void)[] = [];

/** Registers what may be unmapped when mappings run short (the segment caches). */
export function onMappingsShort(shed: () => void): void {
  shedders.push(shed);
}

/** Mappings left before the reserve, read now (and a later check point set from it). */
function roomNow(): number {
  const room = maxMapCount - RESERVE - processMappings();
  checkAt = mapped + Math.max(1, Math.floor(room / 2));
  return room;
}

/** Whether one more segment may be mapped; gives up the cached ones first when needed. */
export function hasMappingRoom(): boolean {
  if (mapped < checkAt) return true;
  if (roomNow() > 0) return true;
  for (const shed of shedders) shed();
  return roomNow() > 0;
}

/** Throws TooManyMappingsError unless one more segment may be mapped (`what`: the operation). */
export function ensureMappingRoom(what: string): void {
  if (!hasMappingRoom()) throw mappingsError(what);
}

export function mappingsError(what: string): TooManyMappingsError {
  return new TooManyMappingsError(
    `${what}: this process maps ${mapped} shared segments and is within ${RESERVE} of the kernel's limit on its memory mappings ` +
      `(vm.max_map_count = ${maxMapCount}), which Node itself needs for its heap. Release tensors you no longer need (t.release()), ` +
      'keep small values together in fewer, larger tensors (one tensor with a row for each), or raise the limit ' +
      `(sysctl vm.max_map_count=${maxMapCount * 4}).`,
  );
}

/** A segment was mapped / unmapped in this thread (segment.ts). */
export function noteSegmentMapped(): void {
  mapped++;
}
export function noteSegmentUnmapped(): void {
  mapped--;
}

/** Segments this thread maps now (tests). */
export function mappedSegments(): number {
  return mapped;
}
