// What identifies the loader a state dict was taken from (NOTE [Whose state dict]).
//
// NOTE [Whose state dict]
// A state dict records places in a sampler's order and generators' states; it means the same
// batches only in a loader that draws the same order over the same dataset and cuts it into
// the same batches. Loaded into another loader it would skip the wrong batches and silently
// lose others (a 7-item, batch-3 state in a 40-item, batch-4 shuffled loader made it yield 9
// of its 10 batches). So every state carries its loader's identity: the dataset's kind and
// length, batchSize, dropLast, the sampler's kind (its class, a batch sampler's with its
// inner one's) and length, and numWorkers; loadStateDict() refuses a state whose identity
// differs, naming each difference. numWorkers counts only where it changes what the state
// means: an iterable dataset (each worker reads its own shard) and a state holding the
// workers' own dataset states (one per worker, NOTE [Resumable datasets]); a map-style
// epoch resumes with any number of workers. The dataset's contents and the user's sampler
// code cannot be compared: a loader made with the same options over another dataset of the
// same length is taken for the same one.
import { BadStateDictError } from '../errors.js';
import { BatchSampler } from './sampler.js';

export interface LoaderIdentity {
  readonly dataset: 'map' | 'iterable';
  /** The dataset's length (an iterable's, null when it has none). */
  readonly datasetLength: number | null;
  readonly batchSize: number | null;
  readonly dropLast: boolean;
  /** The sampler's class ('SequentialSampler', 'RandomSampler', 'BatchSampler(RandomSampler)', a user's); null for an iterable dataset. */
  readonly sampler: string | null;
  /** The sampler's length (a batch sampler's: batches), null when it has none. */
  readonly samplerLength: number | null;
  readonly numWorkers: number;
}

function lengthOf(x: unknown): number | null {
  const n = (x as { length?: unknown } | null)?.length;
  return typeof n === 'number' ? n : null;
}

/** A sampler's kind: its class name, a BatchSampler's with its inner sampler's. */
export function samplerKind(sampler: unknown): string {
  if (sampler instanceof BatchSampler) return `BatchSampler(${samplerKind(sampler.sampler)})`;
  if (Array.isArray(sampler)) return 'Array';
  const name = (sampler as { constructor?: { name?: unknown } } | null)?.constructor?.name;
  return typeof name === 'string' && name !== '' ? name : 'Object';
}

export interface IdentitySource {
  kind: 'map' | 'iterable';
  dataset: unknown;
  batchSize: number | null;
  dropLast: boolean;
  numWorkers: number;
}

/**
 * The identity of a loader over `src`, whose sampler is `sampler`: the one the user gave
 * (sampler or batchSampler), or the one the loader made (a BatchSampler around the one that
 * counts, or with batchSize null the sampler itself).
 */
export function identify(src: IdentitySource, sampler: unknown): LoaderIdentity {
  const map = src.kind === 'map';
  const s = sampler instanceof BatchSampler && src.batchSize !== null ? sampler.sampler : sampler;
  return {
    dataset: src.kind,
    datasetLength: lengthOf(src.dataset),
    batchSize: src.batchSize,
    dropLast: src.dropLast,
    sampler: map ? samplerKind(s) : null,
    samplerLength: map ? lengthOf(s) : null,
    numWorkers: src.numWorkers,
  };
}

const SAID: Record<keyof LoaderIdentity, string> = {
  dataset: 'dataset kind',
  datasetLength: 'dataset length',
  batchSize: 'batchSize',
  dropLast: 'dropLast',
  sampler: 'sampler',
  samplerLength: 'sampler length',
  numWorkers: 'numWorkers',
};

/**
 * The differences between a state's identity and this loader's, in words ("batchSize 3 (this
 * loader's: 4)"); empty when the state is this loader's. `workersMatter`: the state holds
 * per-worker dataset states, so numWorkers must match for a map-style dataset too.
 */
export function identityDifferences(theirs: LoaderIdentity, mine: LoaderIdentity, workersMatter: boolean): string[] {
  const out: string[] = [];
  for (const key of Object.keys(SAID) as (keyof LoaderIdentity)[]) {
    if (key === 'numWorkers' && mine.dataset === 'map' && !workersMatter) continue;
    if (theirs[key] !== mine[key]) out.push(`${SAID[key]} ${show(theirs[key])} (this loader's: ${show(mine[key])})`);
  }
  return out;
}

/** Refuses a state taken from another loader (NOTE [Whose state dict]), naming every difference. */
export function checkIdentity(theirs: LoaderIdentity, mine: LoaderIdentity, workersMatter: boolean): void {
  const diff = identityDifferences(theirs, mine, workersMatter);
  if (diff.length === 0) return;
  throw new BadStateDictError(
    `loadStateDict() was given the state of another loader: ${diff.join(', ')}. A state resumes only a loader made ` +
      'with the same dataset and the same batchSize, dropLast and sampler (and numWorkers, for an iterable dataset or a dataset with its own state).',
  );
}

function show(v: unknown): string {
  return v === null ? 'none' : String(v);
}

/** Checks that `x` has the shape of an identity (for a state read back from a file). */
export function isIdentity(x: unknown): x is LoaderIdentity {
  if (x === null || typeof x !== 'object') return false;
  const i = x as Record<string, unknown>;
  const countOrNull = (v: unknown) => v === null || (Number.isInteger(v) && (v as number) >= 0);
  return (
    (i.dataset === 'map' || i.dataset === 'iterable') &&
    countOrNull(i.datasetLength) &&
    (i.batchSize === null || (Number.isInteger(i.batchSize) && (i.batchSize as number) > 0)) &&
    typeof i.dropLast === 'boolean' &&
    (i.sampler === null || typeof i.sampler === 'string') &&
    countOrNull(i.samplerLength) &&
    Number.isInteger(i.numWorkers) &&
    (i.numWorkers as number) >= 0
  );
}
