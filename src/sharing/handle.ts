// Storages across process boundaries: what travels (a handle, plus a descriptor under
// file_descriptor) and how a received handle becomes a Storage again. The transport's
// reduce/rebuild registry builds on these two functions.
import { addon } from '../native/index.js';
import { Storage } from '../tensor/index.js';
import { BadHandleError } from '../errors.js';
import { Lease, received } from './allocator.js';
import { Segment } from './segment.js';
import type { SharingStrategy } from './strategy.js';

export interface StorageHandle {
  readonly strategy: SharingStrategy;
  /** The segment name under file_system; null under file_descriptor (the fd travels). */
  readonly name: string | null;
  readonly nbytes: number;
}

export interface ExportedStorage {
  readonly handle: StorageHandle;
  /** The descriptor to send with the message (still owned by the sender), or null. */
  readonly fd: number | null;
  readonly segment: Segment;
}

// Shared storages of this process by segment key, so that one segment received twice, or
// received back by the process that sent it, is one Storage.
const byKey = new Map<string, WeakRef<Storage>>();

function remember(key: string, storage: Storage): void {
  byKey.set(key, new WeakRef(storage));
  if (byKey.size > 1024 && byKey.size % 1024 === 0) {
    for (const [k, ref] of byKey) {
      const s = ref.deref();
      if (s === undefined || s.isReleased()) byKey.delete(k);
    }
  }
}

/**
 * Prepares a storage to travel: moves it into shared memory if it is not there yet (one
 * copy) and adds the receiver's reference to its segment (NOTE [Segment lifetime]). If the
 * message is then not sent, call abandonExport().
 */
export function exportStorage(storage: Storage): ExportedStorage {
  storage.shareMemory();
  let lease = storage.backing as Lease;
  let segment = lease.segment;
  if (segment.strategy === 'file_descriptor' && segment.fd === null) {
    // A receiver closed this memfd's descriptor right after mapping it (so that holding many
    // tensors costs no descriptors), and cannot pass it on. The storage moves into a
    // segment of this process instead: one copy, then it travels like any other.
    storage.rebase();
    lease = storage.backing as Lease;
    segment = lease.segment;
  }
  remember(segment.key, storage);
  segment.retain();
  return { handle: { strategy: segment.strategy, name: segment.name, nbytes: storage.nbytes }, fd: segment.fd, segment };
}

/** Undoes exportStorage() for a message that was not sent. */
export function abandonExport(exported: ExportedStorage): void {
  exported.segment.releaseInFlight();
}

/**
 * The Storage for a received handle. Adopts the reference the sender added; takes the
 * descriptor (closes it). A handle that does not fit its segment is a BadHandleError, a
 * segment that no longer exists a SegmentGoneError.
 */
export function importStorage(handle: StorageHandle, fd: number | null): Storage {
  const { strategy, name, nbytes } = handle;
  let key: string;
  if (strategy === 'file_system') {
    if (fd !== null) addon.close(fd);
    if (typeof name !== 'string') throw new BadHandleError('A file_system handle arrived without a segment name.');
    key = `fs:${name}`;
  } else {
    if (fd === null) throw new BadHandleError('A file_descriptor handle arrived without its descriptor.');
    const [, dev, ino] = addon.fstat(fd);
    key = `fd:${dev}:${ino}`;
  }
  // Only a storage still over this very segment is the one that arrived: a storage that
  // moved since it was remembered (rebase(), when it was sent on from a process that had
  // closed its descriptor) has left the old segment to its producer, who may have refilled
  // it with another tensor by now.
  const existing = byKey.get(key)?.deref();
  const held = existing?.backing as Lease | null | undefined;
  if (existing !== undefined && !existing.isReleased() && held != null && held.segment.key === key) {
    if (fd !== null) addon.close(fd);
    // This process already holds the segment: the message's reference is not needed, and a
    // refused message must not keep it either (it would pin the segment for ever).
    held.segment.releaseInFlight();
    if (nbytes > existing.nbytes) throw new BadHandleError(`A handle claims ${nbytes} bytes of a ${existing.nbytes}-byte storage.`);
    return existing;
  }
  const parked = received.take(key);
  let segment: Segment;
  if (parked !== undefined) {
    segment = parked.segment;
    if (fd !== null) addon.close(fd);
    if (nbytes > segment.capacity) {
      segment.releaseInFlight(); // refused: the message's reference is dropped, not kept
      received.park(segment, parked.spare);
      throw new BadHandleError(`A handle claims ${nbytes} bytes but its segment holds ${segment.capacity}.`);
    }
  } else {
    segment = strategy === 'file_system' ? Segment.openName(name!, nbytes) : Segment.openFd(fd!, nbytes);
  }
  // The sender's reference for this message becomes this process's hold (its slot).
  segment.adoptInFlight();
  const storage = Storage.fromBacking(new Lease(segment, nbytes, false, parked?.spare ?? null), nbytes);
  remember(key, storage);
  return storage;
}
