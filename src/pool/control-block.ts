// The memory of NOTE [Pool control block]: int32 words shared by a pool and its workers. A
// memfd of its own rather than a tensor: it holds no reference count, so a worker killed
// while it holds it (a SIGKILL, an abort) pins nothing in the parent; the kernel frees it
// with its last descriptor and mapping.
import { addon, systemError } from '../native/index.js';
import { BadHandleError } from '../errors.js';
import { registerReduction } from '../transport/index.js';

export class ControlBlock {
  readonly words: Int32Array;
  readonly #fd: number;
  readonly #bytes: number;
  #closed = false;

  private constructor(fd: number, bytes: number, keepFd: boolean) {
    let mapping;
    try {
      mapping = addon.map(fd, bytes);
    } catch (e) {
      addon.close(fd);
      throw systemError(e, 'mapping the control block of a pool');
    }
    this.words = new Int32Array(addon.sharedBuffer(mapping, 0, bytes));
    this.#bytes = bytes;
    // A worker needs only the mapping (which outlives the descriptor); the pool sends the
    // descriptor to every worker it starts.
    this.#fd = keepFd ? fd : -1;
    if (!keepFd) addon.close(fd);
  }

  /** A new block of `n` words, all 0. */
  static create(n: number): ControlBlock {
    const bytes = Math.max(4096, Math.ceil((n * 4) / 4096) * 4096);
    let fd: number;
    try {
      fd = addon.memfdCreate('tensorproc-pool', bytes);
    } catch (e) {
      throw systemError(e, 'creating the control block of a pool');
    }
    return new ControlBlock(fd, bytes, true);
  }

  /** The parent's descriptor goes; the words stay mapped while this object lives. */
  close(): void {
    if (this.#closed || this.#fd < 0) return;
    this.#closed = true;
    addon.close(this.#fd);
  }

  static {
    registerReduction<ControlBlock>({
      name: 'pool-control-block',
      type: ControlBlock,
      reduce(block, ctx) {
        if (block.#closed) throw new BadHandleError('This pool has ended: its control block cannot be sent any more.');
        return [ctx.fd(block.#fd), block.#bytes];
      },
      rebuild(state, ctx) {
        const [i, bytes] = state as [number, number];
        const fd = ctx.takeFd(i);
        let size: number;
        try {
          [size] = addon.fstat(fd);
        } catch (e) {
          addon.close(fd);
          throw systemError(e, 'reading the control block of a pool');
        }
        if (!Number.isSafeInteger(bytes) || size < bytes) {
          addon.close(fd);
          throw new BadHandleError(`A received pool control block is ${size} bytes, expected ${String(bytes)}: it is not from tensorproc.`);
        }
        return new ControlBlock(fd, bytes, false);
      },
    });
  }
}
