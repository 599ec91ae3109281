// A dataset's own resumable state in the loader's state dict (torchdata's StatefulDataLoader):
// what a replica (the main process's dataset, or a worker's) and, for an iterable dataset, its
// iterator say of themselves through stateDict() / loadStateDict().
//
// NOTE [Resumable datasets]
// A dataset (or an iterable dataset's iterator) may have `stateDict()` and `loadStateDict(s)`:
// an augmentation stream, a shard's read position, a tokenizer's buffer. Then:
// - Snapshot with each batch. Right after making a batch, the replica takes its state
//   (the dataset's, and the iterator's when the iterator is not the dataset itself) and a
//   worker sends it with the batch (torchdata's snapshot_every_n_steps = 1). Only replicas
//   that have those methods pay for it.
// - What a state dict holds. Per replica (one per worker; the main process's with
//   numWorkers 0), the snapshot of the last batch the main process handed out from it in
//   this epoch, else the state the replica began the epoch with (loaded, fresh, or, for
//   persistent workers, what the `resumed` answer reported). Each worker's results come back
//   in the order it made them and, in order or not (inOrder: false), the batches handed out
//   from one worker are a prefix of those it made: the snapshot is the state after exactly
//   the batches the user has seen from it, whatever it prefetched beyond them.
// - Resuming. Each replica loads its snapshot as it starts: the dataset's first, then its
//   iterator is made and loads its own (torchdata's order), so it continues right after the
//   last batch handed out from it, and makes again the ones it had prefetched. A map-style
//   epoch still skips the sampler's places handed out (NOTE [Resuming an epoch]); an iterable
//   one no longer loads and drops batches, its replicas continue: the resumed epoch yields
//   exactly the batches not yet yielded, with inOrder false too, provided each replica's
//   stream is determined by its state. In order, the round robin resumes at the worker after
//   the one that handed out last, so the order is the uninterrupted epoch's as well.
// - Bounds. The snapshots are one per worker, so a state with them loads only into a loader
//   with the same numWorkers (NOTE [Whose state dict]). A worker replaced after dying
//   (maxWorkerRestarts) starts from its last snapshot too. Between epochs, the state carries
//   the dataset part only where the replica outlives the epoch (numWorkers 0, persistent
//   workers): non-persistent workers build fresh replicas each epoch, as torch's do. The
//   states must be what a state dict is: plain JSON, for a checkpoint.
import { InvalidDatasetError } from '../errors.js';
import { fetcherIterator, type Fetcher } from './fetch.js';

/** A replica's own state: its dataset's and (iterable) its iterator's stateDict(), each when it has one. */
export interface ReplicaState {
  readonly dataset?: unknown;
  readonly iterator?: unknown;
}

interface Stateful {
  stateDict(): unknown;
  loadStateDict(state: unknown): unknown;
}

function stateful(x: unknown): x is Stateful {
  return (
    x !== null &&
    typeof x === 'object' &&
    typeof (x as Stateful).stateDict === 'function' &&
    typeof (x as Stateful).loadStateDict === 'function'
  );
}

/** The replica's state now, or null when neither the dataset nor its iterator has one. */
export function snapshot(dataset: unknown, fetcher: Fetcher | null): ReplicaState | null {
  const it = fetcher === null ? null : fetcherIterator(fetcher);
  const own = stateful(dataset);
  const iter = it !== dataset && stateful(it);
  if (!own && !iter) return null;
  return {
    ...(own ? { dataset: dataset.stateDict() } : {}),
    ...(iter ? { iterator: (it as Stateful).stateDict() } : {}),
  };
}

/** Before the fetcher is made: the dataset loads its part (awaited, it may be async). */
export async function restoreDataset(dataset: unknown, state: ReplicaState | null): Promise<void> {
  if (state?.dataset === undefined) return;
  if (!stateful(dataset)) throw notStateful('dataset');
  await dataset.loadStateDict(state.dataset);
}

/** Once the fetcher made the iterator: the iterator loads its part. */
export async function restoreIterator(fetcher: Fetcher, state: ReplicaState | null): Promise<void> {
  if (state?.iterator === undefined) return;
  const it = fetcherIterator(fetcher);
  if (!stateful(it)) throw notStateful("dataset's iterator");
  await it.loadStateDict(state.iterator);
}

function notStateful(what: string): InvalidDatasetError {
  return new InvalidDatasetError(
    `The state dict holds a ${what} state, but this ${what} has no stateDict()/loadStateDict(): load it into a loader over the same dataset.`,
  );
}

/** Whether a state dict's `replicas` field has the right shape (for a state read back from a file). */
export function isReplicaList(x: unknown): x is (ReplicaState | null)[] | null {
  return x === null || (Array.isArray(x) && x.every((r) => r === null || (typeof r === 'object' && !Array.isArray(r))));
}
