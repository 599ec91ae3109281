// A few 32-bit words of memory shared by every process that holds a queue or event: slot
// counts, flags, and futex words. A memfd of one page, never named (nothing to leak in
// /dev/shm; the kernel frees it with its last descriptor and mapping). The descriptor is
// kept so that the object can travel on to further processes.
import { addon, systemError, type NativeMapping, type FutexResult } from '../native/index.js';
import { BadHandleError } from '../errors.js';

const BYTES = 4096;

export class SharedWords {
  readonly fd: number;
  readonly mapping: NativeMapping;
  readonly words: Int32Array;
  #closed = false;

  private constructor(fd: number) {
    try {
      this.mapping = addon.map(fd, BYTES);
    } catch (e) {
      throw systemError(e, 'mapping the shared state of a queue or event');
    }
    this.fd = fd;
    this.words = new Int32Array(addon.sharedBuffer(this.mapping, 0, BYTES));
  }

  static create(): SharedWords {
    let fd: number;
    try {
      fd = addon.memfdCreate('tensorproc-state', BYTES);
    } catch (e) {
      throw systemError(e, 'creating the shared state of a queue or event');
    }
    try {
      return new SharedWords(fd);
    } catch (e) {
      addon.close(fd);
      throw e;
    }
  }

  /** Maps a received descriptor; takes it (closed on failure). */
  static open(fd: number): SharedWords {
    try {
      const [size, , , seals] = addon.memfdInfo(fd);
      if (size < BYTES)
        throw new BadHandleError(`A received queue or event state is ${size} bytes, expected ${BYTES}: it is not from tensorproc.`);
      // As a received segment (Segment.openFd): a file its sender could shrink would SIGBUS us.
      if (seals < 0 || (seals & addon.SEAL_SHRINK) === 0)
        throw new BadHandleError('A received queue or event state is not a sealed tensorproc memfd: it is not from tensorproc.');
      return new SharedWords(fd);
    } catch (e) {
      addon.close(fd);
      throw e;
    }
  }

  /** Waits on a thread of its own while words[index] === expected (futex, cross-process). */
  waitAsync(index: number, expected: number, timeoutMs: number | null): Promise<FutexResult> {
    return addon.futexWaitAsync(this.mapping, index * 4, expected, timeoutMs ?? -1);
  }

  wake(index: number, count = 2 ** 31 - 1): number {
    return addon.futexWake(this.mapping, index * 4, count);
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    addon.unmap(this.mapping);
    addon.close(this.fd);
  }
}
