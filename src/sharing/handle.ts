// Storages across process boundaries: what travels (a handle, plus a descriptor under
// file_descriptor) and how a received handle becomes a Storage again. The transport's
// reduce/rebuild registry builds on these two functions.
import { addon } from '../native/index.js';
import { Storage } from '../tensor/index.js';
import { BadHandleError, TooManyFilesError } from '../errors.js';
import { Lease, received, emptySegmentCaches, type Spare } from './allocator.js';
import { closeKept, closeReserve, keepReceived, retireWitness, touchKept, warnForwardCopy, withReserve } from './descriptors.js';
import { Segment, fdIdentity, type FdIdentity } from './segment.js';
import type { SharingStrategy } from './strategy.js';
import { closeWitness, witnessFor } from './witness.js';
import { closeBinned } from './witness-bin.js';

export interface StorageHandle {
  readonly strategy: SharingStrategy;
  /**
   * The segment name under file_system. Under file_descriptor (the memfd travels with the
   * message) the segment's identity, `fd:<dev>:<ino>`, or null: a receiver that already maps
   * that segment then knows it without an fstat (one system call a message saved). It trusts
   * the hint only to find a mapping it already has; a segment it does not have is identified
   * by fstat. Sizes are checked, but a hint is not checked against its descriptor: a sender
   * that lies about it (a process of the same user, which could ptrace this one anyway) can
   * make this process read, and miscount references on, another segment it maps.
   */
  readonly name: string | null;
  /** Where the storage starts in the segment's data area: 0, or a piece's (NOTE [Packed small storages]). */
  readonly offset: number;
  readonly nbytes: number;
}

export interface ExportedStorage {
  readonly handle: StorageHandle;
  /**
   * The descriptor to send with the message (still owned by the sender), or null: the memfd,
   * or a named segment's witness (NOTE [Witnesses of named segments]), which receivers do not
   * take: they close it once the whole message is decoded.
   */
  readonly fd: number | null;
  readonly segment: Segment;
}

/**
 * Gives back the shared memory and descriptors this process keeps: free segments of its
 * cache, parked mappings of received ones, the receive reserve, and the descriptors kept so
 * that received tensors can be passed on (NOTE [Kept descriptors]: one passed on after this
 * is copied, announced once), like torch.cuda.empty_cache(). Tensors in use keep working.
 */
export function emptyCache(): void {
  emptySegmentCaches();
  closeKept();
  closeReserve();
  closeWitness();
  closeBinned();
}

// Shared storages of this process by identity (segment key, and the piece's offset when it
// is not 0: NOTE [Packed small storages]), so that one storage received twice, or received
// back by the process that sent it, is one Storage.
const byKey = new Map<string, WeakRef<Storage>>();
// Segments this process has sent or received, by key: a piece of one it holds through other
// storages (a slab) reuses its mapping and hold. Checked on use (leased, unmapped); pruned
// with byKey.
const segments = new Map<string, Segment>();

function identity(key: string, offset: number): string {
  return offset === 0 ? key : `${key}+${offset}`;
}

function remember(id: string, storage: Storage, segment: Segment): void {
  if (segments.get(segment.key) !== segment) segments.set(segment.key, segment);
  // A storage sent again and again (a producer reusing one tensor) is remembered once: a
  // WeakRef per message is garbage the collector must trace specially.
  if (byKey.get(id)?.deref() === storage) return;
  byKey.set(id, new WeakRef(storage));
  if (byKey.size > 1024 && byKey.size % 1024 === 0) {
    for (const [k, ref] of byKey) {
      const s = ref.deref();
      if (s === undefined || s.isReleased()) byKey.delete(k);
    }
    for (const [k, seg] of segments) if (seg.unmapped || (seg.leased === 0 && !seg.openSlab)) segments.delete(k);
  }
}

/** The segment this process holds (a live lease, or its open slab) with this key, or null. */
function heldSegment(key: string): Segment | null {
  const seg = segments.get(key);
  return seg !== undefined && !seg.unmapped && (seg.leased > 0 || seg.openSlab) ? seg : null;
}

/**
 * Prepares a storage to travel: moves it into shared memory if it is not there yet (one
 * copy) and adds the receiver's reference to its segment (NOTE [Segment lifetime]). If the
 * message is then not sent, call abandonExport().
 */
export function exportStorage(storage: Storage): ExportedStorage {
  storage.assertUsable(); // before shareMemory(), which would make a segment for it first
  storage.shareMemory();
  let lease = storage.backing as Lease;
  let segment = lease.segment;
  touchKept(segment);
  if (segment.strategy === 'file_descriptor' && segment.fd === null) {
    // A receiver closed this memfd's descriptor (NOTE [Kept descriptors]: more held than it
    // keeps, or out of descriptors) and cannot pass it on. The storage moves into a segment
    // of this process instead: one copy, announced once, then it travels like any other.
    // Views of its old buffer taken before (`t.data`) are emptied by the move (NOTE [Shared
    // allocation]), as they would no longer show the tensor's memory: keep the tensor, not
    // such a view, across a put of it (or put a clone()).
    warnForwardCopy();
    storage.rebase();
    lease = storage.backing as Lease;
    segment = lease.segment;
  }
  remember(identity(segment.key, lease.offset), storage, segment);
  const named = segment.strategy === 'file_system';
  // Before the reference is added: a segment passed on is marked so first (NOTE [Witnesses of named segments]).
  const fd = named ? witnessFor(segment) : segment.fd;
  segment.retain();
  return {
    handle: { strategy: segment.strategy, name: named ? segment.name : segment.key, offset: lease.offset, nbytes: storage.nbytes },
    fd,
    segment,
  };
}

/** Undoes exportStorage() for a message that was not sent. */
export function abandonExport(exported: ExportedStorage): void {
  exported.segment.releaseInFlight();
}

/**
 * The Storage for a received handle. Adopts the reference the sender added; takes the
 * descriptor (keeps it while the storage lives, NOTE [Kept descriptors], or closes it). A
 * handle that does not fit its segment is a BadHandleError, a segment that no longer exists
 * a SegmentGoneError. `fdCarriedBefore`: the message carried this storage's descriptor for
 * a storage before it (pieces of one slab: NOTE [Packed small storages]), and `fd` is null.
 */
export function importStorage(handle: StorageHandle, fd: number | null, fdCarriedBefore = false): Storage {
  const { strategy, name, offset, nbytes } = handle;
  const end = offset + nbytes; // checked safe integers (checkHandle)
  if (strategy === 'file_system') {
    // `fd` is the message's witness (NOTE [Witnesses of named segments]): closed only once the
    // reference is adopted or given back, whatever happens.
    try {
      if (typeof name !== 'string') throw new BadHandleError('A file_system handle arrived without a segment name.');
      return (
        importKnown(`fs:${name}`, offset, nbytes, null) ??
        importNew(
          withReserve(() => Segment.openName(name, end), isTooManyFiles),
          offset,
          nbytes,
          null,
        )
      );
    } finally {
      // The receive reserve, which the next receive closes first (then it needs no probe), or
      // into the bin of witnesses closed together (NOTE [Witness bin]).
      if (fd !== null) retireWitness(fd);
    }
  }
  // The sender's identity hint finds a mapping this process has without an fstat; when it
  // finds none, the descriptor's real identity is looked up once more (a hint may be stale
  // or wrong), and only then is the memfd mapped.
  const hint = typeof name === 'string' && name.startsWith('fd:') ? name : null;
  if (fd === null) {
    // Pieces of one slab in one message carry its descriptor once (NOTE [Packed small
    // storages]): a storage before this one in the message mapped the segment already.
    const found = hint === null || !fdCarriedBefore ? null : importKnown(hint, offset, nbytes, null);
    if (found !== null) return found;
    throw new BadHandleError('A file_descriptor handle arrived without its descriptor.');
  }
  if (hint !== null) {
    const found = importKnown(hint, offset, nbytes, fd);
    if (found !== null) return found;
  }
  let fdId: FdIdentity;
  try {
    fdId = fdIdentity(fd);
  } catch (e) {
    addon.close(fd);
    throw e;
  }
  if (fdId.key !== hint) {
    const found = importKnown(fdId.key, offset, nbytes, fd);
    if (found !== null) return found;
  }
  const segment = Segment.openFd(fd, end, true, fdId); // takes the descriptor, even when it throws
  keepReceived(segment, null);
  return importNew(segment, offset, nbytes, null);
}

/**
 * The storage for a segment this process holds or has parked, or null. Takes `fd` when it
 * returns a storage (or throws); leaves it to the caller when it returns null.
 */
function importKnown(key: string, offset: number, nbytes: number, fd: number | null): Storage | null {
  // Only a storage still over this very segment is the one that arrived: a storage that
  // moved since it was remembered (rebase(), when it was sent on from a process that had
  // closed its descriptor) has left the old segment to its producer, who may have refilled
  // it with another tensor by now.
  const id = identity(key, offset);
  const existing = byKey.get(id)?.deref();
  const held = existing?.backing as Lease | null | undefined;
  const same = existing !== undefined && !existing.isReleased() && held != null && held.segment.key === key && held.offset === offset;
  // Else another storage of this process may hold the segment (pieces of one slab: NOTE
  // [Packed small storages]): the piece gets a lease of its own over the same mapping.
  const segment = same ? held.segment : heldSegment(key);
  if (segment !== null) {
    // This process already holds the segment: the message's reference is not needed, and a
    // refused message must not keep it either (it would pin the segment for ever). Dropped
    // before the descriptor is closed: NOTE [Orphans in flight].
    segment.releaseInFlight();
    // A received segment whose descriptor was closed takes this one; an owner (which has its
    // own, or probes: NOTE [Orphans in flight]) or a receiver that kept one closes it.
    if (fd !== null) {
      if (segment.fd === null && !segment.owned) keepReceived(segment, fd);
      else addon.close(fd);
    }
    if (same) {
      if (nbytes > existing.nbytes) throw new BadHandleError(`A handle claims ${nbytes} bytes of a ${existing.nbytes}-byte storage.`);
      return existing;
    }
    if (offset + nbytes > segment.capacity)
      throw new BadHandleError(`A handle claims bytes ${offset} to ${offset + nbytes} of a segment that holds ${segment.capacity}.`);
    const storage = Storage.fromBacking(new Lease(segment, offset, nbytes, segment.owned), nbytes);
    remember(id, storage, segment);
    return storage;
  }
  const parked = received.take(key);
  if (parked === undefined) return null;
  const seg = parked.segment;
  if (offset + nbytes > seg.capacity) {
    seg.releaseInFlight(); // refused: the message's reference is dropped, not kept (then the descriptor closed)
    if (fd !== null) addon.close(fd);
    received.park(seg, parked.spare);
    throw new BadHandleError(`A handle claims bytes ${offset} to ${offset + nbytes} of a segment that holds ${seg.capacity}.`);
  }
  if (fd !== null) keepReceived(seg, fd);
  return importNew(seg, offset, nbytes, parked.spare);
}

/** A new storage over a segment this process maps; the message's reference becomes its hold. */
function importNew(segment: Segment, offset: number, nbytes: number, spare: Spare | null): Storage {
  segment.adoptInFlight();
  const storage = Storage.fromBacking(new Lease(segment, offset, nbytes, false, spare), nbytes);
  remember(identity(segment.key, offset), storage, segment);
  return storage;
}

const isTooManyFiles = (e: unknown): boolean => e instanceof TooManyFilesError;
