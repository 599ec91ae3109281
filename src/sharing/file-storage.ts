// Storages over a file's pages (mp.fromFile): open and map a region of a file, recognise one
// region arriving twice as one storage, and guard the mapping (read-only, and a file that
// shrinks under it: NOTE [File mappings and SIGBUS] in native/file-map.cc).
//
// NOTE [File storages]
// A FileStorage maps the bytes [start, start + nbytes) of a regular file, from a 64 KiB
// boundary below `start` (mmap wants a page-aligned offset; 64 KiB is a multiple of every
// page size Linux has). Read-only (the default) is MAP_PRIVATE over a read-only descriptor:
// pages nobody writes are the page cache's, shared with every process mapping the file, and a
// write through a raw `t.data` view (which JavaScript cannot make read-only) lands in a
// private copy-on-write page of this process: never in the file, never a crash. Tensor
// methods refuse writes (ReadOnlyError). `writable: true` is MAP_SHARED over a read-write
// descriptor: writes reach the file and every process mapping it. The descriptor lives as
// long as the mapping (the addon closes both together) and is what travels under
// file_descriptor; under file_system the receiver opens the path and checks that it is the
// same file (device and inode). A storage is no segment: it has no reference count and no
// holder slot, because the file, not tensorproc, owns the bytes; each process's mapping ends
// when its storage is released or collected.
import { closeSync, constants, fstatSync, openSync, type BigIntStats } from 'node:fs';
import { addon } from '../native/index.js';
import { Storage } from '../tensor/index.js';
import { FileChangedError, FileOpenError, FileTruncatedError, TooManyFilesError } from '../errors.js';

/** What identifies a mapped region wherever it travels. */
export interface FileRegion {
  /** The absolute path the file had when it was first mapped (file_system receivers open it). */
  readonly path: string;
  readonly dev: string;
  readonly ino: string;
  /** Byte offset in the file where the storage starts. */
  readonly start: number;
  readonly nbytes: number;
  readonly writable: boolean;
}

const ALIGN = 65536;
let brokenWords: Int32Array | null = null;

export class FileStorage extends Storage {
  readonly region: FileRegion;
  /** The descriptor the mapping holds (closed with it): lent to messages under file_descriptor. */
  readonly fd: number;
  readonly #slot: number;

  private constructor(buffer: ArrayBuffer, delta: number, region: FileRegion, fd: number, slot: number) {
    super(buffer, delta, region.nbytes, null);
    this.region = region;
    this.fd = fd;
    this.#slot = slot;
  }

  /** Maps `region` of the file open at `fd`, taking the descriptor (closed on failure too). */
  static map(fd: number, region: FileRegion): FileStorage {
    const base = Math.floor(region.start / ALIGN) * ALIGN;
    const delta = region.start - base;
    let mapped: [ArrayBuffer, number];
    try {
      mapped = addon.mapFile(fd, base, delta + region.nbytes, region.writable ? 1 : 0);
    } catch (e) {
      closeSync(fd);
      const err = e as { errno?: number; syscall?: string; code?: string };
      if (err.code === 'EMFILE' || err.code === 'ENFILE' || err.code === 'ENOMEM')
        throw new TooManyFilesError(`Cannot map ${region.path} (${err.code}): release file tensors you no longer need.`, err);
      throw new FileOpenError(
        `Cannot map ${region.path} (${err.code ?? 'error'}): is it a regular file on a filesystem that supports mmap?`,
        err,
      );
    }
    const storage = new FileStorage(mapped[0], delta, region, fd, mapped[1]);
    remember(storage);
    return storage;
  }

  override get readOnly(): boolean {
    return !this.region.writable;
  }

  override isShared(): boolean {
    return true; // the page cache is the shared memory
  }

  override shareMemory(): this {
    return this;
  }

  override rebase(): this {
    return this;
  }

  override checkIntact(): void {
    if (this.isReleased()) return;
    brokenWords ??= new Int32Array(addon.fileBrokenWords());
    if (Atomics.load(brokenWords, this.#slot) !== 0) {
      throw new FileTruncatedError(
        `${this.region.path} shrank under its mapping: the tensor's bytes are gone (a raw t.data view reads zeros now). Keep files that are mapped from being truncated, or copy what you need with clone().`,
      );
    }
  }

  /** Unmaps now (views taken with `t.data` become empty) and closes the descriptor. */
  override release(): void {
    if (this.isReleased()) return;
    const buffer = this.internalBuffer as ArrayBuffer;
    super.release();
    forget(this);
    addon.detach(buffer);
  }
}

// One storage per mapped region per process, so that a region received twice (or sent back
// to the process that mapped it) is one storage and one mapping, as segments are (handle.ts).
const byRegion = new Map<string, WeakRef<FileStorage>>();

function regionKey(r: FileRegion): string {
  return `${r.dev}:${r.ino}:${r.start}:${r.nbytes}:${r.writable ? 'w' : 'r'}`;
}

function remember(s: FileStorage): void {
  if (byRegion.size >= 256) for (const [k, ref] of byRegion) if (ref.deref()?.isReleased() !== false) byRegion.delete(k);
  byRegion.set(regionKey(s.region), new WeakRef(s));
}

function forget(s: FileStorage): void {
  const key = regionKey(s.region);
  if (byRegion.get(key)?.deref() === s) byRegion.delete(key);
}

/** The live storage this process has for `region`, or null. */
export function knownRegion(region: FileRegion): FileStorage | null {
  const s = byRegion.get(regionKey(region))?.deref();
  return s !== undefined && !s.isReleased() ? s : null;
}

/** Opens `path` for a mapping (non-blocking: a FIFO must not hang the open). Throws FileOpenError. */
export function openFile(path: string, writable: boolean): { fd: number; stats: BigIntStats } {
  let fd: number;
  try {
    fd = openSync(path, (writable ? constants.O_RDWR : constants.O_RDONLY) | constants.O_NONBLOCK);
  } catch (e) {
    const err = e as { errno?: number; syscall?: string; code?: string };
    if (err.code === 'EMFILE' || err.code === 'ENFILE')
      throw new TooManyFilesError(`Cannot open ${path}: out of file descriptors (${err.code}).`, err);
    throw new FileOpenError(`Cannot open ${path} (${err.code ?? 'error'}): ${hint(err.code)}`, err);
  }
  let stats: BigIntStats;
  try {
    stats = fstatSync(fd, { bigint: true });
  } catch (e) {
    closeSync(fd);
    throw new FileOpenError(`Cannot stat ${path}.`, e as { errno?: number });
  }
  if (!stats.isFile()) {
    closeSync(fd);
    const code = stats.isDirectory() ? 'EISDIR' : 'ENODEV';
    throw new FileOpenError(
      `Cannot map ${path}: it is ${stats.isDirectory() ? 'a directory' : 'not a regular file'}; fromFile maps regular files.`,
      {
        errno: code === 'EISDIR' ? -21 : -19,
        syscall: 'open',
        code,
      },
    );
  }
  return { fd, stats };
}

function hint(code: string | undefined): string {
  if (code === 'ENOENT') return 'no such file; check the path (relative paths are from process.cwd()).';
  if (code === 'EACCES' || code === 'EPERM')
    return 'permission denied; a writable mapping needs write permission, a read-only one read permission.';
  if (code === 'EISDIR') return 'it is a directory; fromFile maps regular files.';
  return 'check the path and its permissions.';
}

/**
 * Checks a received region against the file open at `fd` (the same device and inode, still
 * long enough) and maps it; takes the descriptor.
 */
export function mapReceived(fd: number, stats: BigIntStats, region: FileRegion): FileStorage {
  if (String(stats.dev) !== region.dev || String(stats.ino) !== region.ino) {
    closeSync(fd);
    throw new FileChangedError(
      `A tensor of ${region.path} arrived, but that path now names another file (replaced or renamed since it was mapped). Send it under the file_descriptor strategy, or keep the file in place.`,
    );
  }
  checkFits(fd, stats.size, region);
  return FileStorage.map(fd, region);
}

/** Throws FileTruncatedError (closing fd) when the file is now shorter than the region. */
export function checkFits(fd: number, size: bigint, region: FileRegion): void {
  if (size < BigInt(region.start + region.nbytes)) {
    closeSync(fd);
    throw new FileTruncatedError(
      `${region.path} is ${size} bytes now, shorter than the ${region.start + region.nbytes} bytes its tensor maps: it shrank since it was mapped.`,
    );
  }
}
