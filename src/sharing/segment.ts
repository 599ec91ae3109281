// Segment: one shared-memory object, mapped once in this process, with a one-page header
// (layout and reference slots: NOTE [Reference slots] in segment-header.ts).
//
// NOTE [Segment lifetime]
// Every segment starts with a header (magic, version, refcount, creator pid, capacity,
// per-process slots). The refcount counts *processes* (threads count as their own) that
// hold the segment, plus one for each message in flight that carries it: a sender adds the
// receiver's reference before sending (retain), and the receiver adopts it (adoptInFlight),
// or the sender takes it back if the message is not sent (releaseInFlight). A hold is also
// recorded in the holder's slot, so that the manager can take back what a killed process
// held. Rules:
//  - file_descriptor (memfd): the kernel frees the memory with its last descriptor and
//    mapping, so a kill -9 cannot leak it. The refcount only tells the owner's cache when a
//    segment is free everywhere (refcount == 1: only the cache holds it) and may be reused.
//  - file_system (named, /dev/shm/tensorproc_<pid>_<random>): whoever brings the refcount
//    to zero unlinks the name. Processes that die holding references are covered by the
//    manager process (src/sharing/manager: NOTE [The file_system manager]), which unlinks
//    names whose users all died. Every process tells it which names it maps.
//  - Descriptors are closed as soon as they are not needed (a mapping outlives its
//    descriptor): a receiver keeps those of the memfds it holds, so that it can pass them on
//    (NOTE [Kept descriptors], descriptors.ts); the owner of a memfd keeps one descriptor per
//    segment it may still send, bounded by its cache.
//  - Every holder records its holds in its slot of the header, so that what a process killed
//    while holding a segment held can be taken back: by the owner's cache (either strategy)
//    and by the manager (named segments). NOTE [Reference slots].
import { randomBytes } from 'node:crypto';
import { addon, systemError, type NativeMapping } from '../native/index.js';
import { BadHandleError } from '../errors.js';
import type { SharingStrategy } from './strategy.js';
import { checkRoom } from './room.js';
import { HEADER_BYTES, MAGIC, W_MAGIC, W_REFS, W_WAITING, initHeader, claimSlot, wakeCreator } from './segment-header.js';
import { managerClient } from './manager/client.js';
import { debug } from '../debug.js';
import { ensureMappingRoom, noteSegmentMapped, noteSegmentUnmapped } from './mappings.js';
import { countMapped, countUnmapped } from './memory-counters.js';

const unmapHooks: ((segment: Segment) => void)[] = [];
/**
 * Calls `hook` with each segment as it is unmapped: for what a layer above keeps per segment
 * (descriptors.ts's receive reserve), which this file must not import.
 */
export function onSegmentUnmapped(hook: (segment: Segment) => void): void {
  unmapHooks.push(hook);
}

/** What a spare left with a segment must have: its buffer, detached when the entry is dropped. */
export interface SpareLike {
  readonly buffer: ArrayBuffer;
}

export const SHM_PREFIX = 'tensorproc_';

/** A name no other segment has or had: pid plus 64 random bits. */
function newName(): string {
  return `/${SHM_PREFIX}${process.pid}_${randomBytes(8).toString('hex')}`;
}

export class Segment {
  readonly strategy: SharingStrategy;
  /** The shm name ('/tensorproc_…') for file_system, null for file_descriptor. */
  readonly name: string | null;
  /** Identity in this process: one segment received twice is recognised by this key. */
  readonly key: string;
  /** Bytes available after the header. */
  readonly capacity: number;
  readonly mapping: NativeMapping;
  /** The header as Int32 words over a SharedArrayBuffer, for Atomics. */
  readonly header: Int32Array;
  #fd: number | null;
  #unmapped = false;
  /** Made by this process (its cache's), not received. */
  readonly owned: boolean;
  /**
   * Managed by allocator.ts: the leases on this segment live in this process (one per
   * storage; several for a slab of packed small storages, NOTE [Packed small storages]).
   * While any is, this process holds the segment.
   */
  leased = 0;
  /** Managed by packing.ts: the open slab of this thread, taking new pieces (NOTE [Packed small storages]). */
  openSlab = false;
  /** Managed by allocator.ts: a lease ended whose buffer may still be alive (moved, or collected but not swept). */
  outlived = false;
  /** Managed by allocator.ts: listed for the exit cleanup. */
  tracked = false;
  /**
   * Managed by allocator.ts: buffers of ended pieces that no user saw, by byte offset, kept
   * for the next lease of the piece there (NOTE [Piece buffers], packing.ts). Not counted
   * by liveBuffers(); detached by unmap().
   */
  pieceSpares: Map<number, SpareLike> | null = null;
  /** Count word of this process's slot: -2 not looked up yet, -1 none free. */
  #slot = -2;
  /**
   * Managed by in-flight.ts (NOTE [Orphans in flight]): while probing, a descriptor of this
   * memfd's own (the one sent closed); the probe's number, which picks the byte locked.
   */
  probeFd: number | null = null;
  probeCount = 0;
  /** Set by create(): the descriptor sent is not the one this process's mapping was made from. */
  probeable = false;
  /**
   * Managed by witness.ts (NOTE [Witnesses of named segments]): the first and last witness
   * epochs this owned named segment was sent in since it was last free; -1: none.
   */
  sentFirst = -1;
  sentLast = -1;

  private constructor(
    strategy: SharingStrategy,
    name: string | null,
    key: string,
    capacity: number,
    mapping: NativeMapping,
    fd: number | null,
    owned: boolean,
  ) {
    this.strategy = strategy;
    this.owned = owned;
    this.name = name;
    this.key = key;
    this.capacity = capacity;
    this.mapping = mapping;
    this.header = new Int32Array(addon.sharedBuffer(mapping, 0, HEADER_BYTES));
    this.#fd = fd;
    noteSegmentMapped(); // NOTE [Mapping budget]
    countMapped(owned, capacity, fd !== null); // mp.memoryStats()
  }

  /** A new segment with room for `capacity` bytes, refcount 1 (this process). */
  static create(strategy: SharingStrategy, capacity: number): Segment {
    const size = HEADER_BYTES + capacity;
    let fd: number;
    let name: string | null = null;
    const what = `allocating a ${capacity}-byte shared segment (${strategy})`;
    checkRoom(strategy, size);
    ensureMappingRoom(what); // NOTE [Mapping budget]
    try {
      if (strategy === 'file_system') {
        name = newName();
        // NOTE [Registering before creating]
        // The manager hears of the name before it exists: noteMapped() connects at once when
        // this process is not connected yet (a manager that listens has it in its backlog
        // before shmCreate() returns), so that a kill at any point after the name exists
        // finds the manager knowing this pid, whose death sends it to /dev/shm for the names
        // with this pid in them (registry.ts: a pid gone before its connection was accepted
        // too). Told after, a process killed while its first segment was being made (its
        // fallocate, milliseconds at 4 MiB) left that name to the next manager's start.
        // A name that is then not made is unmapped again below.
        managerClient.noteMapped(name);
        try {
          fd = addon.shmCreate(name, size);
        } catch (e) {
          managerClient.noteUnmapped(name);
          throw e;
        }
      } else {
        fd = addon.memfdCreate('tensorproc', size);
      }
    } catch (e) {
      throw systemError(e, what);
    }
    let mapping: NativeMapping;
    let key: string;
    try {
      mapping = addon.map(fd, size);
      key = name !== null ? `fs:${name}` : fdIdentity(fd).key;
    } catch (e) {
      addon.close(fd);
      if (name !== null) {
        addon.shmUnlink(name);
        managerClient.noteUnmapped(name);
      }
      throw systemError(e, what);
    }
    // A named segment is reopened by name; only memfds need their descriptor to travel.
    if (name !== null) {
      addon.close(fd);
      fd = -1;
    }
    // NOTE [Orphans in flight]: a memfd is sent from a description of its own, not the one
    // mapped here (a mapping keeps its description open, and the probe must see the sent one
    // end). Without a descriptor for it, sent as it is, and never probed.
    let probeable = false;
    if (name === null) {
      try {
        const sent = addon.reopen(fd);
        addon.close(fd);
        fd = sent;
        probeable = true;
      } catch {
        // kept as it is
      }
    }
    const seg = new Segment(strategy, name, key, capacity, mapping, fd >= 0 ? fd : null, true);
    seg.probeable = probeable;
    seg.#slot = initHeader(seg.header, process.pid, capacity);
    debug('segment made: %s, %d bytes%s', strategy, capacity, name === null ? '' : `, ${name}`);
    return seg;
  }

  /**
   * Maps a received memfd. Takes the descriptor: it is closed here unless `keepFd`.
   * `nbytes` is where the handle claims its storage ends in the data area (its byte offset
   * plus its size); a segment smaller than that is a BadHandleError, never a SIGBUS later.
   */
  static openFd(fd: number, nbytes: number, keepFd = false, identity: FdIdentity | null = null): Segment {
    try {
      const { size, key, sealed } = identity ?? fdIdentity(fd);
      // A file its sender can shrink would turn our next touch of the lost pages into a
      // SIGBUS: every tensorproc memfd is sealed against it (native/segment.cc).
      if (!sealed) {
        throw new BadHandleError(
          'A received descriptor is not a sealed tensorproc memfd (its sender could shrink it under this process, which would then die of SIGBUS): it was refused. It was not sent by tensorproc.',
        );
      }
      const seg = Segment.#open('file_descriptor', null, key, fd, size, nbytes);
      if (keepFd) {
        seg.#fd = fd;
        fd = -1;
      }
      return seg;
    } finally {
      if (fd >= 0) addon.close(fd);
    }
  }

  /** Maps a named segment (file_system). */
  static openName(name: string, nbytes: number): Segment {
    // A NUL would end the name shm_open sees early: another name than the one keyed here.
    if (typeof name !== 'string' || !name.startsWith(`/${SHM_PREFIX}`) || name.includes('/', 1) || name.includes('\0')) {
      throw new BadHandleError(`${JSON.stringify(name)} is not a tensorproc segment name.`);
    }
    let fd: number;
    try {
      fd = addon.shmOpen(name);
    } catch (e) {
      throw systemError(e, `opening shared segment ${name}`);
    }
    try {
      const [size, , , mode, uid] = addon.fstat(fd);
      // Only a regular file of this user is a segment of ours: a process running as root could
      // otherwise be sent the name of another user's file, and count references in it and
      // remove it at its release (found by the fault campaign's garbage kind).
      if ((mode & 0o170000) !== 0o100000 || uid !== process.geteuid!()) {
        throw new BadHandleError(
          `${name} is not a segment of this user (a file of uid ${uid}, or not a regular file): the handle is not from tensorproc.`,
        );
      }
      const seg = Segment.#open('file_system', name, `fs:${name}`, fd, size, nbytes);
      managerClient.noteMapped(name);
      return seg;
    } finally {
      addon.close(fd);
    }
  }

  static #open(strategy: SharingStrategy, name: string | null, key: string, fd: number, size: number, nbytes: number): Segment {
    if (!Number.isSafeInteger(nbytes) || nbytes < 0 || size < HEADER_BYTES + nbytes) {
      throw new BadHandleError(
        `A handle claims bytes up to ${nbytes} but its segment holds ${Math.max(0, size - HEADER_BYTES)}: the handle is corrupt or not from tensorproc.`,
      );
    }
    ensureMappingRoom('mapping a received shared segment'); // NOTE [Mapping budget]
    let mapping: NativeMapping;
    try {
      mapping = addon.map(fd, size);
    } catch (e) {
      throw systemError(e, 'mapping a received shared segment');
    }
    const seg = new Segment(strategy, name, key, size - HEADER_BYTES, mapping, null, false);
    if (Atomics.load(seg.header, W_MAGIC) !== MAGIC) {
      seg.unmap();
      throw new BadHandleError('A received segment has no tensorproc header: the handle is corrupt or not from tensorproc.');
    }
    return seg;
  }

  get unmapped(): boolean {
    return this.#unmapped;
  }

  /**
   * ArrayBuffers alive over this segment in this process, the header's own excepted,
   * wherever they are now: a buffer transferred to another thread (postMessage,
   * structuredClone with transfer) still counts, though the sender's copy is detached.
   * The piece buffers kept for reuse (pieceSpares) do not.
   */
  liveBuffers(): number {
    return addon.mappingRefs(this.mapping) - 2 - (this.pieceSpares?.size ?? 0); // the handle and the header view
  }

  /** Detaches the kept piece buffers (NOTE [Piece buffers]): nothing but leases uses the mapping then. */
  dropPieceSpares(): void {
    const spares = this.pieceSpares;
    if (spares === null) return;
    this.pieceSpares = null;
    for (const s of spares.values()) addon.detach(s.buffer);
  }

  /** The memfd to send, or null (named segments, or a receiver that closed it). */
  get fd(): number | null {
    return this.#fd;
  }

  /**
   * A receiver keeps a descriptor it was sent for this memfd (so it can pass the segment
   * on: NOTE [Kept descriptors] in descriptors.ts); a second one is closed at once.
   */
  keepFd(fd: number): void {
    if (this.#fd === null && !this.#unmapped) this.#fd = fd;
    else addon.close(fd);
  }

  /** The kept descriptor, now the caller's (null if none): the segment keeps none. */
  takeFd(): number | null {
    const fd = this.#fd;
    this.#fd = null;
    return fd;
  }

  /** Closes the kept descriptor; the mapping stays. */
  closeFd(): void {
    if (this.#fd === null) return;
    addon.close(this.#fd);
    this.#fd = null;
  }

  refcount(): number {
    return Atomics.load(this.header, W_REFS);
  }
  /**
   * Blocks this thread until only this process's hold is left (refcount 1) or `timeoutMs`
   * passes; true if it is free. For the creator's cache (NOTE [Waiting for a segment]).
   */
  waitFree(timeoutMs: number): boolean {
    const h = this.header;
    const deadline = performance.now() + timeoutMs;
    Atomics.add(h, W_WAITING, 1);
    try {
      for (;;) {
        const refs = Atomics.load(h, W_REFS);
        if (refs === 1) return true;
        const left = deadline - performance.now();
        if (left <= 0) return false;
        addon.futexWait(this.mapping, W_REFS * 4, refs, left);
      }
    } finally {
      Atomics.sub(h, W_WAITING, 1);
    }
  }

  /** Adds a reference for a message about to carry the segment (in flight). Returns the count. */
  retain(): number {
    return Atomics.add(this.header, W_REFS, 1) + 1;
  }
  /** A received message's reference becomes this process's hold (recorded in its slot). */
  adoptInFlight(): void {
    const slot = this.#ownSlot();
    if (slot >= 0) Atomics.add(this.header, slot, 1);
  }
  /** Drops a reference in flight (a message that was not sent, or arrived where it was held). */
  releaseInFlight(): number {
    return this.#dropTotal();
  }
  /**
   * Drops this process's hold (or, if it has none left, a reference in flight); at zero a
   * named segment's name is removed (see NOTE [Segment lifetime]). Returns the count left.
   */
  unref(): number {
    const slot = this.#ownSlot();
    if (slot >= 0) {
      // A compare-and-swap, not a blind subtract: a caller dropping an in-flight reference
      // through unref() must not take this process's slot below zero.
      let n = Atomics.load(this.header, slot);
      while (n > 0) {
        const seen = Atomics.compareExchange(this.header, slot, n, n - 1);
        if (seen === n) break;
        n = seen;
      }
    }
    return this.#dropTotal();
  }

  #ownSlot(): number {
    // Named or not: the owner takes back what dead holders held (NOTE [Reference slots]).
    if (this.#slot === -2) this.#slot = claimSlot(this.header, process.pid);
    return this.#slot;
  }

  #dropTotal(): number {
    const left = Atomics.sub(this.header, W_REFS, 1) - 1;
    // The creator may be waiting for this segment to come back (NOTE [Waiting for a segment]).
    // Not through a mapping given up already (the header view keeps the memory, but the
    // mapping's handle is spent): that creator's wait then runs out instead.
    if (!this.#unmapped) wakeCreator(this.header, this.mapping, left);
    if (left === 0 && this.name !== null) {
      try {
        addon.shmUnlink(this.name);
      } catch {
        // already removed (by the manager after a crash): nothing to do
      }
    }
    return left;
  }

  /** A fresh ArrayBuffer over `nbytes` bytes of the data area from `offset`. */
  lease(nbytes: number, offset = 0): ArrayBuffer {
    return addon.buffer(this.mapping, HEADER_BYTES + offset, nbytes);
  }

  /**
   * Unmaps and closes the descriptor. The file stops being mapped here at once when no buffer
   * but the header's is left (addon.evict: the header becomes private memory), so that the
   * memory goes back now (the last mapping of a memfd or of a removed name frees it), not
   * when the collector gets to the header (NOTE [Mapping lifetime]); otherwise once the last
   * buffer over it is gone.
   */
  unmap(): void {
    if (this.#unmapped) return;
    this.#unmapped = true;
    noteSegmentUnmapped();
    // While probing, the probe's descriptor stands in for the kept one (in-flight.ts).
    countUnmapped(this.owned, this.capacity, this.#fd !== null || this.probeFd !== null);
    if (this.name !== null) managerClient.noteUnmapped(this.name);
    if (this.#fd !== null) {
      addon.close(this.#fd);
      this.#fd = null;
    }
    if (this.probeFd !== null) {
      addon.close(this.probeFd); // NOTE [Orphans in flight]
      this.probeFd = null;
    }
    for (const hook of unmapHooks) hook(this); // NOTE [Receive reserve]
    this.dropPieceSpares();
    addon.evict(this.mapping, HEADER_BYTES, 2); // the handle and the header view
    addon.unmap(this.mapping);
  }

  /** Drops this process's reference and mapping: the segment is gone from this process. */
  drop(): void {
    if (this.#unmapped) return;
    this.unref();
    this.unmap();
  }
}

export interface FdIdentity {
  readonly size: number;
  /** `fd:<dev>:<ino>`: the segment's key, the same in every process that maps it. */
  readonly key: string;
  /** Sealed against shrinking: its sender cannot truncate it under our mapping. */
  readonly sealed: boolean;
}

/** A memfd's size, key and seals, from one native call. */
export function fdIdentity(fd: number): FdIdentity {
  let st: [number, number, number, number];
  try {
    st = addon.memfdInfo(fd);
  } catch (e) {
    throw systemError(e, 'opening a shared segment received by descriptor');
  }
  return { size: st[0], key: `fd:${st[1]}:${st[2]}`, sealed: st[3] >= 0 && (st[3] & addon.SEAL_SHRINK) !== 0 };
}
