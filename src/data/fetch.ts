// Fetchers, as torch/utils/data/_utils/fetch.py: turn what the sampler gave (an array of
// indices, one index, or for an iterable dataset just "the next batch") into a batch. The
// same code runs in the main process (numWorkers 0) and in each worker.
import { defaultCollate } from './collate.js';
import { CollateStream } from './collate-stream.js';
import { releaseTensors } from './release.js';
import type { Dataset, MapDataset, IterableDataset } from './dataset.js';

export type CollateFn = (batch: unknown[]) => unknown;
export type ConvertFn = (sample: unknown) => unknown;

/** What one fetch asks for: indices of a batch, one sampler element (batchSize null: an index, or a list for bulk loading), or null (an iterable dataset's next). */
export type FetchRequest = readonly number[] | number | null;

/** An iterable dataset that has nothing more to give (torch raises StopIteration). */
export const END: unique symbol = Symbol('end of the dataset');

export interface Fetcher {
  fetch(req: FetchRequest): Promise<unknown>;
}

function isThenable(x: unknown): x is PromiseLike<unknown> {
  return x !== null && (typeof x === 'object' || typeof x === 'function') && typeof (x as PromiseLike<unknown>).then === 'function';
}

export interface FetcherOptions {
  /** Batches of this many samples (iterable datasets), or null: one sample at a time. */
  batchSize: number | null;
  dropLast: boolean;
  /** Applied to a batch (batchSize set) or to each sample (batchSize null). */
  collate: CollateFn | ConvertFn;
  /** Default collate releases each sample's tensors once copied (NOTE [Releasing samples]). */
  releaseSamples?: boolean;
}

/** defaultCollate, then the samples' tensors released when the loader owns them (NOTE [Releasing samples]). */
function collateOwned(collate: CollateFn, samples: unknown[], release: boolean): unknown {
  if (!release) return collate(samples);
  try {
    return collate(samples);
  } finally {
    for (const s of samples) releaseTensors(s);
  }
}

export function makeFetcher(dataset: Dataset, kind: 'map' | 'iterable', opts: FetcherOptions): Fetcher {
  return kind === 'map' ? new MapFetcher(dataset as MapDataset, opts) : new IterableFetcher(dataset as IterableDataset, opts);
}

class MapFetcher implements Fetcher {
  constructor(
    readonly dataset: MapDataset,
    readonly opts: FetcherOptions,
  ) {}

  async fetch(req: FetchRequest): Promise<unknown> {
    const { dataset, opts } = this;
    // batchSize null: the sampler's element reaches getItem whole, a list of indices included
    // (torch's bulk loading: auto_collation off, dataset[possibly_batched_index]).
    if (opts.batchSize === null || typeof req === 'number') {
      return (opts.collate as ConvertFn)(await dataset.getItem(req as number)); // an async collate's promise is awaited by the caller's await
    }
    const indices = req as readonly number[];
    const samples = new Array<unknown>(indices.length);
    // Default collate takes the samples as they come while getItem answers at once (NOTE
    // [Collating as samples come]); the first promise sends the rest to Promise.all.
    const stream = opts.collate === defaultCollate ? new CollateStream(indices.length, opts.releaseSamples === true) : null;
    let pending = false;
    try {
      for (let k = 0; k < samples.length; k++) {
        const s = dataset.getItem(indices[k]!);
        if (isThenable(s)) pending = true;
        else if (!pending) stream?.add(s);
        samples[k] = s;
      }
    } catch (e) {
      stream?.abandon(); // a getItem that threw: the batch begun goes back to the cache now
      throw e;
    }
    if (stream !== null) {
      if (!pending) return stream.finish();
      let all: unknown[];
      try {
        all = await Promise.all(samples);
      } catch (e) {
        stream.abandon();
        throw e;
      }
      return stream.collateWith(all);
    }
    return collateOwned(opts.collate as CollateFn, pending ? await Promise.all(samples) : samples, opts.releaseSamples === true);
  }
}

class IterableFetcher implements Fetcher {
  readonly #it: AsyncIterator<unknown> | Iterator<unknown>;
  #ended = false;
  constructor(
    dataset: IterableDataset,
    readonly opts: FetcherOptions,
  ) {
    const a = dataset as AsyncIterable<unknown>;
    this.#it =
      typeof a[Symbol.asyncIterator] === 'function' ? a[Symbol.asyncIterator]() : (dataset as Iterable<unknown>)[Symbol.iterator]();
  }

  async #next(): Promise<unknown> {
    if (this.#ended) return END;
    let r = this.#it.next();
    if (isThenable(r)) r = await r;
    if ((r as IteratorResult<unknown>).done) {
      this.#ended = true;
      return END;
    }
    return (r as IteratorResult<unknown>).value;
  }

  async fetch(): Promise<unknown> {
    const { batchSize, dropLast, collate, releaseSamples } = this.opts;
    if (batchSize === null) {
      const s = await this.#next();
      return s === END ? END : (collate as ConvertFn)(s);
    }
    const samples: unknown[] = [];
    while (samples.length < batchSize) {
      const s = await this.#next();
      if (s === END) break;
      samples.push(s);
    }
    if (samples.length === 0 || (dropLast && samples.length < batchSize)) return END;
    return collateOwned(collate as CollateFn, samples, releaseSamples === true);
  }

  /** The dataset's iterator (NOTE [Resumable datasets]: it may have a state of its own). */
  get iterator(): unknown {
    return this.#it;
  }

  /** Stops the dataset's iterator (its `finally` blocks run), as breaking out of a for-of does. */
  async close(): Promise<void> {
    if (this.#ended) return;
    this.#ended = true;
    await this.#it.return?.();
  }
}

/** Ends an iterable dataset's iteration early (a no-op for map-style). */
export async function closeFetcher(f: Fetcher): Promise<void> {
  if (f instanceof IterableFetcher) await f.close();
}

/** An iterable dataset's iterator (null for map-style). */
export function fetcherIterator(f: Fetcher): unknown {
  return f instanceof IterableFetcher ? f.iterator : null;
}
