// One storage's lease on a chunk: what src/tensor sees as a DeviceBacking.
import type { DeviceBacking } from '../tensor/index.js';
import type { Chunk } from './chunk.js';
import { endLease } from './cache.js';

export class ChunkLease implements DeviceBacking {
  readonly device: `cuda:${number}`;
  readonly index: number;
  readonly ptr: bigint;
  #ended = false;

  constructor(
    readonly chunk: Chunk,
    /** Where the storage starts in the chunk. */
    readonly offset: number,
    readonly nbytes: number,
  ) {
    this.index = chunk.index;
    this.device = `cuda:${chunk.index}`;
    this.ptr = chunk.ptr + BigInt(offset);
  }

  release(): void {
    if (this.#ended) return;
    this.#ended = true;
    endLease(this.chunk);
  }
}
