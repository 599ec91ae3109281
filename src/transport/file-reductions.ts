// The reduction of a file-backed storage (mp.fromFile, NOTE [File storages]): it travels as
// the file's identity and the region it maps, plus the mapping's descriptor under
// file_descriptor; under file_system the receiver opens the path and checks it is the same
// file. The receiver maps the same pages (the page cache is shared), once per process.
import { fstatSync } from 'node:fs';
import { FileStorage, knownRegion, mapReceived, openFile, checkFits, type FileRegion } from '../sharing/file-storage.js';
import { getSharingStrategy } from '../sharing/index.js';
import { addon } from '../native/index.js';
import { FrameDecodeError } from '../errors.js';
import { registerReduction, type RebuildContext } from './registry.js';

type FileState = [path: string, dev: string, ino: string, start: number, nbytes: number, writable: 0 | 1, fd: number];

function region(state: unknown): { region: FileRegion; fdIndex: number } {
  if (!Array.isArray(state) || state.length !== 7) throw new FrameDecodeError('A received file storage entry is malformed.');
  const [path, dev, ino, start, nbytes, writable, fdIndex] = state as FileState;
  if (typeof path !== 'string' || typeof dev !== 'string' || typeof ino !== 'string' || (writable !== 0 && writable !== 1))
    throw new FrameDecodeError('A received file storage names its file wrongly.');
  if (!Number.isSafeInteger(start) || start < 0 || !Number.isSafeInteger(nbytes) || nbytes <= 0 || !Number.isSafeInteger(start + nbytes))
    throw new FrameDecodeError('A received file storage claims an invalid region.');
  if (!Number.isSafeInteger(fdIndex)) throw new FrameDecodeError('A received file storage has an invalid descriptor index.');
  return { region: { path, dev, ino, start, nbytes, writable: writable === 1 }, fdIndex };
}

function rebuild(state: unknown, ctx: RebuildContext): FileStorage {
  const { region: r, fdIndex } = region(state);
  const fd = fdIndex >= 0 ? ctx.takeFd(fdIndex) : null;
  const known = knownRegion(r);
  if (known !== null) {
    if (fd !== null) addon.close(fd);
    return known;
  }
  if (fd === null) {
    const opened = openFile(r.path, r.writable);
    return mapReceived(opened.fd, opened.stats, r);
  }
  let size: bigint;
  try {
    size = fstatSync(fd, { bigint: true }).size;
  } catch (e) {
    addon.close(fd);
    throw e;
  }
  checkFits(fd, size, r);
  return FileStorage.map(fd, r);
}

registerReduction<FileStorage>({
  name: 'file-storage',
  type: FileStorage,
  reduce(s, ctx): FileState {
    s.assertUsable();
    const r = s.region;
    const fdIndex = getSharingStrategy() === 'file_descriptor' ? ctx.fd(s.fd) : -1;
    return [r.path, r.dev, r.ino, r.start, r.nbytes, r.writable ? 1 : 0, fdIndex];
  },
  rebuild,
  // Nothing is held for a message in flight: untaken descriptors are closed by the transport.
});
