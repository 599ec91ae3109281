// A cluster Pool's imap and imapUnordered (NOTE [Cluster pool]) as a local Pool's are: the
// input read lazily, at most `ahead` tasks ahead of the consumer (its `buffersize`), so that an
// endless generator works; results handed out as their chunks come back (in order, or as they
// finish), not once the whole call is done. Each chunk is a call of its own on the head's
// queue (pool-calls.ts), so hosts take them as they take any chunk.
import { setMaxListeners } from 'node:events';
import * as mp from '../index.js';

import type { RemoteImapOptions } from '../pool/cluster-link.js';

/**
 * Yields `run(chunk)`'s values chunk by chunk. A chunk's error is thrown where its turn comes
 * (in order: after the values before it; unordered: when it fails), and ends the call; leaving
 * the loop early ends it too: the input is closed, and chunks given to no host yet are dropped
 * (`run` gets a signal that aborts them; one running on a host runs to its end there, its
 * result dropped).
 */
export async function* streamChunks(
  iterable: AsyncIterable<unknown> | Iterable<unknown>,
  o: RemoteImapOptions,
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
  type Entry = { values: Promise<unknown[]>; n: number };
  /** Chunks given out and not handed over, in the order given (what `ordered` hands over next). */
  const inFlight: Entry[] = [];
  /** Unordered: chunks settled and not handed over, in the order they settled. */
  const settled: Entry[] = [];
  let wake: (() => void) | null = null;
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
        const entry = { values, n: items.length };
        inFlight.push(entry);
        if (!o.ordered) {
          // Noted once, as it settles: no race over every chunk in flight for each one handed over.
          const arrive = (): void => {
            settled.push(entry);
            wake?.();
          };
          values.then(arrive, arrive);
        }
        ahead += items.length;
      }
      if (inFlight.length === 0) return;
      let chunk: Entry;
      if (o.ordered) chunk = inFlight.shift()!;
      else {
        while (settled.length === 0) await new Promise<void>((r) => (wake = r));
        wake = null;
        chunk = settled.shift()!;
        inFlight.splice(inFlight.indexOf(chunk), 1);
      }
      const values = await chunk.values;
      ahead -= chunk.n;
      yield* values;
    }
  } finally {
    o.signal?.removeEventListener('abort', onAbort);
    ended.abort(new mp.AbortError('The imap ended before its chunks did.'));
    if (!exhausted) await source.return?.();
  }
}
