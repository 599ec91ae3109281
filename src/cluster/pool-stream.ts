// A cluster Pool's imap and imapUnordered (NOTE [Cluster pool]) as a local Pool's are: the
// input read lazily, at most `ahead` tasks ahead of the consumer (its `buffersize`), so that an
// endless generator works; results handed out as their chunks come back (in order, or as they
// finish), not once the whole call is done. Each chunk is a call of its own on the head's
// queue (pool-calls.ts), so hosts take them as they take any chunk.
import { setMaxListeners } from 'node:events';
import * as mp from '../index.js';

export interface StreamOptions {
  chunksize: number;
  /** Tasks read ahead of the consumer at most. */
  ahead: number;
  ordered: boolean;
  signal?: AbortSignal;
}

/**
 * Yields `run(chunk)`'s values chunk by chunk. A chunk's error is thrown where its turn comes
 * (in order: after the values before it; unordered: when it fails), and ends the call; leaving
 * the loop early ends it too: the input is closed, and chunks given to no host yet are dropped
 * (`run` gets a signal that aborts them; one running on a host runs to its end there, its
 * result dropped).
 */
export async function* streamChunks(
  iterable: AsyncIterable<unknown> | Iterable<unknown>,
  o: StreamOptions,
  run: (items: unknown[], signal: AbortSignal) => Promise<unknown[]>,
): AsyncIterableIterator<unknown> {
  const ended = new AbortController();
  // One listener per chunk in flight (pool-calls.ts), up to `ahead` of them: not a leak.
  setMaxListeners(0, ended.signal);
  const onAbort = (): void => ended.abort(o.signal!.reason);
  if (o.signal?.aborted) onAbort();
  else o.signal?.addEventListener('abort', onAbort, { once: true });
  const source =
    Symbol.asyncIterator in iterable
      ? (iterable as AsyncIterable<unknown>)[Symbol.asyncIterator]()
      : (iterable as Iterable<unknown>)[Symbol.iterator]();
  let exhausted = false;
  const inFlight: { values: Promise<unknown[]>; n: number }[] = [];
  let ahead = 0;
  try {
    for (;;) {
      while (!exhausted && ahead < o.ahead) {
        if (ended.signal.aborted) throw new mp.AbortError(undefined, { cause: ended.signal.reason });
        const items: unknown[] = [];
        while (items.length < o.chunksize) {
          const r = await source.next();
          if (r.done) {
            exhausted = true;
            break;
          }
          items.push(r.value);
        }
        if (items.length === 0) break;
        const values = run(items, ended.signal);
        // Thrown where its turn comes, or dropped with the call: never an unhandled rejection.
        values.catch(() => {});
        inFlight.push({ values, n: items.length });
        ahead += items.length;
      }
      if (inFlight.length === 0) return;
      let i = 0;
      if (!o.ordered)
        i = await Promise.race(
          inFlight.map((c, k) =>
            c.values.then(
              () => k,
              () => k,
            ),
          ),
        );
      const [chunk] = inFlight.splice(i, 1);
      const values = await chunk!.values;
      ahead -= chunk!.n;
      yield* values;
    }
  } finally {
    o.signal?.removeEventListener('abort', onAbort);
    ended.abort(new mp.AbortError('The imap ended before its chunks did.'));
    if (!exhausted) await source.return?.();
  }
}
