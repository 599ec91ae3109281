// mp.fromFile(path, { dtype, shape?, offset?, writable? }): a file's pages as a tensor, no
// copy (torch.from_file, numpy.memmap). NOTE [File storages] in file-storage.ts.
import { closeSync } from 'node:fs';
import { resolve } from 'node:path';
import { FileSizeError, InvalidArgumentError } from '../errors.js';
import { Tensor, Storage, dtypeInfo, type DType } from '../tensor/index.js';
import { checkShape, numelOf, describe } from '../tensor/shape.js';
import { FileStorage, openFile } from './file-storage.js';

export interface FromFileOptions {
  dtype: DType;
  /** Defaults to the rest of the file after `offset`, as one dimension. */
  shape?: readonly number[] | number;
  /** Where the tensor starts in the file, in bytes (a multiple of the dtype's size). */
  offset?: number;
  /** Map read-write (writes reach the file). Default false: writing methods throw ERR_TP_READ_ONLY. */
  writable?: boolean;
}

/** Maps a file's bytes as a tensor (synchronous). */
export function fromFile(path: string, opts: FromFileOptions): Tensor {
  if (typeof path !== 'string' || path === '') throw new InvalidArgumentError(`fromFile() takes a file path, got ${describe(path)}.`);
  if (opts === null || typeof opts !== 'object')
    throw new InvalidArgumentError(`fromFile(path, options) needs options with a dtype, e.g. { dtype: 'float32' }; got ${describe(opts)}.`);
  const info = dtypeInfo(opts.dtype);
  const offset = opts.offset ?? 0;
  if (typeof offset !== 'number' || !Number.isSafeInteger(offset) || offset < 0)
    throw new InvalidArgumentError(`offset must be a non-negative integer number of bytes, got ${describe(offset)}.`);
  if (opts.writable !== undefined && typeof opts.writable !== 'boolean')
    throw new InvalidArgumentError(`writable must be true or false, got ${describe(opts.writable)}.`);
  const writable = opts.writable === true;
  const shape = opts.shape === undefined ? null : checkShape(opts.shape);
  if (offset % info.itemsize !== 0)
    throw new FileSizeError(`offset ${offset} is not a multiple of ${info.name}'s ${info.itemsize} bytes: elements must be aligned.`);
  const abs = resolve(path);
  const { fd, stats } = openFile(abs, writable);
  let dims: number[];
  let nbytes: number;
  try {
    [dims, nbytes] = fit(abs, Number(stats.size), offset, shape, info.itemsize, info.name);
  } catch (e) {
    closeSync(fd);
    throw e;
  }
  if (nbytes === 0) {
    closeSync(fd);
    return new Tensor(Storage.allocate(0, false), info, dims); // nothing to map
  }
  const region = { path: abs, dev: String(stats.dev), ino: String(stats.ino), start: offset, nbytes, writable };
  return new Tensor(FileStorage.map(fd, region), info, dims); // map() takes fd, also when it throws
}

/** The shape and byte count of the tensor, checked against the file's size. */
function fit(path: string, size: number, offset: number, shape: number[] | null, itemsize: number, dtype: string): [number[], number] {
  if (offset > size) throw new FileSizeError(`offset ${offset} is past the end of ${path} (${size} bytes).`);
  let dims: number[];
  if (shape === null) {
    const rest = size - offset;
    if (rest % itemsize !== 0)
      throw new FileSizeError(
        `${path} has ${rest} bytes after offset ${offset}, not a whole number of ${dtype} elements (${itemsize} bytes each): pass a shape.`,
      );
    dims = [rest / itemsize];
  } else {
    dims = shape;
  }
  const nbytes = numelOf(dims, itemsize) * itemsize;
  if (offset + nbytes > size)
    throw new FileSizeError(
      `shape [${dims.join(', ')}] of ${dtype} needs ${nbytes} bytes from offset ${offset}, but ${path} has ${size - offset} bytes after it (${size} in all).`,
    );
  return [dims, nbytes];
}
