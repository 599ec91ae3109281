// Loads the C++ addon and gives it a type. Nothing here validates: callers in src/tensor,
// src/sharing and src/transport check their arguments before calling in.
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { dirname, join, resolve } from 'node:path';
import { AddonError } from '../errors.js';
import type { EnvName } from '../env.js';

/** An mmap of a segment, opaque to JS. See NOTE [Mapping lifetime] in native/mapping.cc. */
export interface NativeMapping {
  readonly __mapping: unique symbol;
}

export interface NativePoll {
  start(events: number): void;
  stop(): void;
  close(): void;
  ref(): void;
  unref(): void;
}

export interface Addon {
  memfdCreate(name: string, size: number): number;
  shmCreate(name: string, size: number): number;
  shmOpen(name: string): number;
  shmUnlink(name: string): void;
  /** [size, dev, ino, mode, uid] */
  fstat(fd: number): [number, number, number, number, number];
  /** [size, dev, ino, seals] of a received descriptor; seals -1 when the file cannot be sealed. */
  memfdInfo(fd: number): [number, number, number, number];
  /** F_SEAL_SHRINK, the seal that stops a memfd's sender from shrinking it under our mapping. */
  readonly SEAL_SHRINK: number;
  close(fd: number): void;
  dup(fd: number): number;
  /** A new open file description of fd's file (open of /proc/self/fd/N). */
  reopen(fd: number): number;
  /** A read lock on byte `at`, held by fd's open file description while any descriptor of it exists. */
  ofdLock(fd: number, at: number): void;
  /** Whether another open file description holds a lock on byte `at` of fd's file. */
  ofdLocked(fd: number, at: number): boolean;

  map(fd: number, size: number): NativeMapping;
  buffer(m: NativeMapping, offset: number, length: number): ArrayBuffer;
  sharedBuffer(m: NativeMapping, offset: number, length: number): SharedArrayBuffer;
  unmap(m: NativeMapping): void;
  detach(ab: ArrayBuffer): void;
  /**
   * Stops mapping the file now if `refs` holders are all that is left (the handle and buffers
   * over the first `keepBytes`, which become private anonymous memory): NOTE in mapping.cc.
   */
  evict(m: NativeMapping, keepBytes: number, refs: number): boolean;
  /**
   * Maps [offset, offset+length) of fd's file (offset page-aligned) and takes the descriptor
   * (closed with the mapping). [buffer, slot]: `slot` indexes fileBrokenWords(). NOTE [File
   * mappings and SIGBUS] in native/file-map.cc.
   */
  mapFile(fd: number, offset: number, length: number, writable: number): [ArrayBuffer, number];
  /** One word per file mapping slot: 1 once a SIGBUS replaced the mapping with zero pages. */
  fileBrokenWords(): SharedArrayBuffer;
  /** [maps, unmaps] since the process started, all threads. */
  mappingStats(): [number, number];
  /** Holders of a mapping's memory: its handle and every live buffer over it. */
  mappingRefs(m: NativeMapping): number;

  futexWait(m: NativeMapping, byteOffset: number, expected: number, timeoutMs: number): FutexResult;
  futexWake(m: NativeMapping, byteOffset: number, count: number): number;
  spinWhile(m: NativeMapping, byteOffset: number, expected: number, maxUs: number): boolean;
  futexWaitAsync(m: NativeMapping, byteOffset: number, expected: number, timeoutMs: number): Promise<FutexResult>;
  /** futexWaitAsync threads of this process still running (their environment may be gone). */
  futexWaitThreads(): number;

  socketpair(): [number, number];
  /** Bytes sent, or -EAGAIN (-11). */
  send(fd: number, bytes: Uint8Array, fds?: Int32Array): number;
  /**
   * Datagram length, -EAGAIN (-11) when none waits, -1 at end of stream, -2 for a zero-length
   * datagram. `reserve`: a descriptor to close first, RECV_PROBE (default) or RECV_NO_PROBE
   * (NOTE [Receiving descriptors] in channel.cc); given one and finding nothing, it leaves a
   * replacement (or -1) in fdsOut[0].
   */
  recv(fd: number, buffer: Uint8Array, fdsOut: Int32Array, reserve?: number): number;
  /** A descriptor that holds nothing (an eventfd): a slot kept for later. */
  reserveFd(): number;
  /** Closes fds[0..n) (reordering the array): contiguous runs in one close_range() each. */
  closeFds(fds: Int32Array, n: number): void;
  Poll: new (fd: number, callback: (status: number, events: number) => void) => NativePoll;

  setParentDeathSignal(signal: number): void;
  getppid(): number;

  // peer.cc: the file_system manager's socket (src/sharing/manager).
  /** A non-blocking listening SOCK_SEQPACKET socket bound to `path`. */
  unixListen(path: string, backlog: number): number;
  /** A non-blocking SOCK_SEQPACKET socket connected to `path`. */
  unixConnect(path: string): number;
  /** A connection from a listening socket, or -EAGAIN (-11) when none waits. */
  accept(fd: number): number;
  /** [pid, uid, gid] of the peer, as the kernel recorded at connect time. */
  peerCredentials(fd: number): [number, number, number];
  /** A descriptor that polls readable once process `pid` has exited. */
  pidfdOpen(pid: number): number;
  /** Takes an exclusive flock on `fd` without waiting: false if another process holds it. */
  tryLock(fd: number): boolean;
  /** Raises the open-file soft limit to the hard limit; returns the soft limit now. */
  raiseFileLimit(): number;
  /** The open-file soft limit now. */
  fileLimit(): number;

  // fill.cc
  /** Fills every byte of `target` with `pattern` (16 bytes, repeated) by streaming stores. */
  streamFill(target: ArrayBufferView, pattern: Uint8Array): void;

  // cuda.cc (NOTE [Reaching the driver]): every call but cudaLoad/cudaStats needs a loaded driver.
  /** Loads the driver once per process (later calls return the first result); never throws. */
  cudaLoad(path?: string): { ok: boolean; reason: string; driverVersion: number; devices: number; library: string };
  cudaDevice(index: number): {
    name: string;
    uuid: string;
    totalBytes: number;
    vmm: boolean;
    posixFd: boolean;
    computeMode: number;
    granularity: number;
  };
  /** [free, total] bytes of device memory. */
  cudaMemGetInfo(index: number): [number, number];
  /** [handle, devicePointer] of a new exportable allocation, mapped; bytes a multiple of the granularity. */
  cudaChunkCreate(index: number, bytes: number): [bigint, bigint];
  /** A new descriptor (close-on-exec) for the allocation, the caller's. */
  cudaChunkExport(index: number, handle: bigint): number;
  /** [handle, devicePointer] of an imported allocation, mapped; the descriptor stays the caller's. */
  cudaChunkImport(index: number, fd: number, bytes: number): [bigint, bigint];
  /** Synchronizes, unmaps, frees the reservation, releases the handle. */
  cudaChunkDrop(index: number, handle: bigint, ptr: bigint, bytes: number): void;
  cudaMemset(index: number, ptr: bigint, count: number, width: number, lo: number, hi: number): void;
  cudaCopyHtoD(index: number, dst: bigint, host: ArrayBufferLike, hostOffset: number, n: number): void;
  cudaCopyDtoH(index: number, host: ArrayBufferLike, hostOffset: number, src: bigint, n: number): void;
  cudaCopyDtoD(index: number, dst: bigint, src: bigint, n: number): void;
  cudaSynchronize(index: number): void;
  /** Registers the whole mapping with the driver (page-locked); false if it already was. */
  cudaPin(m: NativeMapping): boolean;
  cudaIsPinned(m: NativeMapping): boolean;
  cudaStats(): { pinnedBytes: number; pinnedRanges: number; chunks: number };
}

export type FutexResult = 'ok' | 'timed-out' | 'not-equal';

export const EAGAIN = -11;
/** recv(): a zero-length datagram (never sent by tensorproc). */
export const RECV_EMPTY = -2;
/** recv() reserve: make sure one descriptor slot is free first (the default). */
export const RECV_PROBE = -1;
/** recv() reserve: no descriptor is expected (notices, the manager's protocol). */
export const RECV_NO_PROBE = -2;
/**
 * recv() reserve: no probe, and a datagram whose descriptors the kernel dropped (a full
 * table) is returned with fdsOut[0] = -1 instead of thrown (NOTE [Receiving descriptors]).
 */
export const RECV_DROPS_SEEN = -3;
/** fdsOut[0] after a recv with RECV_DROPS_SEEN: the datagram's descriptors were dropped. */
export const FDS_DROPPED = -1;
/** A datagram larger than the buffer it was read into (recv throws with this errno). */
export const EMSGSIZE = -90;
export const POLL_READABLE = 1;
export const POLL_WRITABLE = 2;
export const POLL_DISCONNECT = 4;

/** `TENSORPROC_ADDON=<path>`: load the addon from there (a build of one's own), and only there. */
export const ADDON_ENV = 'TENSORPROC_ADDON' satisfies EnvName;

function candidates(): string[] {
  const own = process.env[ADDON_ENV];
  if (own) {
    // Absolute, for dlopen (a bare name would be searched on the library path) and for the
    // children and the manager that inherit it (the manager runs in /).
    const path = resolve(own);
    process.env[ADDON_ENV] = path;
    return [path];
  }
  // dist/src/native/addon.js -> package root is three levels up; src/native/addon.ts under
  // a TypeScript loader -> two levels up.
  const here = dirname(fileURLToPath(import.meta.url));
  const roots = [join(here, '..', '..', '..'), join(here, '..', '..')];
  const out: string[] = [];
  for (const root of roots) {
    out.push(join(root, 'build', 'Release', 'tensorproc.node'));
    out.push(join(root, 'prebuilds', `${process.platform}-${process.arch}`, 'tensorproc.node'));
  }
  return out;
}

function load(): { addon: Addon; path: string } {
  if (process.platform !== 'linux') {
    throw new AddonError(`tensorproc runs on Linux only (this is ${process.platform}).`);
  }
  const tried = candidates();
  for (const path of tried) {
    if (!existsSync(path)) continue;
    try {
      // dlopen, not require(): a path that is not a shared object must not run as a script.
      const module = { exports: {} as Addon };
      process.dlopen(module, path);
      return { addon: module.exports, path };
    } catch (e) {
      throw new AddonError(
        `The tensorproc native addon at ${path} does not load (${(e as Error).message}). Rebuild it: \`npm rebuild tensorproc\`.`,
      );
    }
  }
  throw new AddonError(
    `The tensorproc native addon is not built. Looked in:\n  ${tried.join('\n  ')}\n` +
      'Run `npm ci` (or `npm rebuild tensorproc`) with g++, make and python3 installed.',
  );
}

const loaded = load();
export const addon: Addon = loaded.addon;
/**
 * The open-file soft limit, raised to the hard limit at load (NOTE [Kept descriptors],
 * src/sharing/descriptors.ts): as Go's runtime does, so that holding many shared tensors
 * does not run out of descriptors at a soft limit set for select()-era programs.
 */
export const fileLimit: number = addon.raiseFileLimit();
/** Where the addon was loaded from. */
export const addonPath: string = loaded.path;
