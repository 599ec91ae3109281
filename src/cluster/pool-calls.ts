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
  /** Called with each chunk's values as it arrives (imapUnordered). */
  each?: (values: unknown[]) => void;
  signal?: AbortSignal;
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

  /** Queues `items` as chunks of `chunksize`; the promise has each chunk's values, in order. */
  add(
    target: WireTarget,
    items: readonly unknown[],
    chunksize: number,
    star: boolean,
    signal?: AbortSignal,
    each?: (v: unknown[]) => void,
  ): Promise<unknown[][]> {
    return new Promise<unknown[][]>((res, rej) => {
      const n = Math.ceil(items.length / chunksize);
      const call: CallState = { results: new Array(n), remaining: n, settled: false, resolve: res, reject: rej, each, signal };
      if (n === 0) return res([]);
      if (signal) {
        const onAbort = (): void => this.fail(call, new mp.AbortError(undefined, { cause: signal.reason }));
        if (signal.aborted) return onAbort();
        signal.addEventListener('abort', onAbort, { once: true });
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
    call.each?.(values);
    if (--call.remaining === 0) {
      call.settled = true;
      call.resolve(call.results);
    }
  }

  fail(call: CallState, e: Error): void {
    if (call.settled) return;
    call.settled = true;
    call.reject(e);
  }

  /** Tasks queued here and not given to a host. */
  queued(): number {
    let n = 0;
    for (const c of this.queue) n += c.items.length;
    return n;
  }
}

/** An imapUnordered over chunks: yields each chunk's values as `add` reports them. */
export async function* asTheyCome(start: (each: (v: unknown[]) => void) => Promise<unknown>): AsyncIterableIterator<unknown> {
  const ready: unknown[][] = [];
  let wake: (() => void) | null = null;
  let finished = false;
  let failure: unknown = null;
  start((v) => {
    ready.push(v);
    wake?.();
  })
    .then(
      () => (finished = true),
      (e: unknown) => {
        failure = e;
        finished = true;
      },
    )
    .finally(() => wake?.());
  for (;;) {
    while (ready.length) yield* ready.shift()!;
    if (failure !== null) throw failure;
    if (finished) return;
    await new Promise<void>((r) => (wake = r));
    wake = null;
  }
}
