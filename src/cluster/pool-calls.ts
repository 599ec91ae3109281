// A cluster Pool's calls as chunks (NOTE [Cluster pool]): each call cut into chunks of
// `chunksize` items, queued in the order made (CPython's task queue), and its results put back
// in order as the hosts return them; the head's counts for pool.stats().
import * as mp from '../index.js';
import type { WireTarget } from './protocol.js';

export interface CallState {
  results: unknown[][];
  remaining: number;
  settled: boolean;
  resolve(values: unknown[][]): void;
  reject(e: Error): void;
  signal?: AbortSignal;
  /** The caller gave a signal: its chunks on other hosts are cancelled there on abort. */
  abortable: boolean;
  /** Stops listening to `signal`. */
  off?: () => void;
}

export interface Chunk {
  seq: number;
  call: CallState;
  index: number;
  target: WireTarget;
  items: readonly unknown[];
  star: boolean;
}

export class Calls {
  /** Chunks not yet given to a host, in the order made. */
  readonly queue: Chunk[] = [];
  /** Tasks returned and failed on other hosts (this host's are its local Pool's: pool-local.ts). */
  done = 0;
  failed = 0;
  #seq = 0;
  readonly #onAbort: ((call: CallState) => void) | undefined;

  /** `onAbort`: a call was aborted by its signal (the head cancels its chunks held by hosts). */
  constructor(onAbort?: (call: CallState) => void) {
    this.#onAbort = onAbort;
  }

  /** Queues `items` as chunks of `chunksize`; the promise has each chunk's values, in order. */
  add(
    target: WireTarget,
    items: readonly unknown[],
    chunksize: number,
    star: boolean,
    signal?: AbortSignal,
    abortable = signal !== undefined,
  ): Promise<unknown[][]> {
    return new Promise<unknown[][]>((res, rej) => {
      const n = Math.ceil(items.length / chunksize);
      const call: CallState = { results: new Array(n), remaining: n, settled: false, resolve: res, reject: rej, signal, abortable };
      if (n === 0) return res([]);
      if (signal) {
        const onAbort = (): void => {
          this.fail(call, new mp.AbortError(undefined, { cause: signal.reason }));
          this.#onAbort?.(call);
        };
        if (signal.aborted) return onAbort();
        signal.addEventListener('abort', onAbort, { once: true });
        // Taken off once the call settles: an imap's signal outlives thousands of chunk calls.
        call.off = () => signal.removeEventListener('abort', onAbort);
      }
      for (let i = 0; i < n; i++)
        this.queue.push({ seq: this.#seq++, call, index: i, target, items: items.slice(i * chunksize, (i + 1) * chunksize), star });
    });
  }

  /** A chunk's values: its call resolves once it has them all. */
  settle(c: Chunk, values: unknown[]): void {
    const call = c.call;
    if (call.settled) return;
    call.results[c.index] = values;
    if (--call.remaining === 0) {
      call.settled = true;
      call.off?.();
      call.resolve(call.results);
    }
  }

  fail(call: CallState, e: Error): void {
    if (call.settled) return;
    call.settled = true;
    call.off?.();
    call.reject(e);
  }

  /** Tasks queued here and not given to a host. */
  queued(): number {
    let n = 0;
    for (const c of this.queue) if (!c.call.settled) n += c.items.length; // a failed call's are dropped when reached
    return n;
  }
}
