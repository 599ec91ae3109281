// One epoch's plan: the base seed of its workers and the stream of fetch requests (batches
// of indices from the samplers, or for an iterable dataset "the next batch" for ever), and
// the state that resumes it (loader.stateDict(), torchdata's StatefulDataLoader).
//
// NOTE [Resuming an epoch]
// Everything random in an epoch is drawn from generators: the loader's (the workers' base
// seed, then the shuffle order, lazily as batches are asked for) and those of samplers the
// user made. A state dict therefore records those generators' states as they were when the
// epoch began, the persistent base seed if one was drawn before it, and which batches were
// handed out, by their place in the sampler's order: all those before `yielded`, and with
// `inOrder: false` the few beyond it that overtook the rest (`alsoYielded`). Loading it and
// iterating again redraws the same seed and the same order and skips exactly those batches:
// for a map-style dataset in the sampler, without loading them; an iterable dataset cannot
// skip without reading, so its first `yielded` batches are loaded again and dropped (its
// datasets must be deterministic for the rest to match; with `inOrder: false` which worker
// loads which batch depends on timing, so an iterable dataset resumes only approximately),
// unless its replicas have states of their own: then they continue from those, nothing is
// loaded twice and the resumption is exact (NOTE [Resumable datasets]).
import { BadStateDictError } from '../errors.js';
import type { FetchRequest } from './fetch.js';
import { Generator, checkSeed, type GeneratorState } from './generator.js';
import { isIdentity, type LoaderIdentity } from './state-identity.js';
import { isReplicaList, type ReplicaState } from './dataset-state.js';

/** Format 2 added `loader`, the identity of the loader it was taken from (NOTE [Whose state dict]). */
export const STATE_FORMAT = 'tensorproc.DataLoader/2';

export interface DataLoaderState {
  readonly format: typeof STATE_FORMAT;
  /** What identifies the loader it was taken from: loadStateDict() refuses it elsewhere. */
  readonly loader: LoaderIdentity;
  /** The loader's generator as the epoch began. */
  readonly generator: GeneratorState;
  /** The generators of the samplers given, as the epoch began. */
  readonly samplerGenerators: readonly GeneratorState[];
  /** The persistent workers' base seed, if drawn before this epoch began. */
  readonly persistentSeed: number | null;
  /** Every batch before this place in the sampler's order was handed out. */
  readonly yielded: number;
  /** Places after `yielded` handed out too (inOrder: false). */
  readonly alsoYielded: readonly number[];
  /**
   * The datasets' own states, one per worker (the main process's with numWorkers 0), as of
   * the last batch handed out from each (NOTE [Resumable datasets]); null when none has one.
   */
  readonly replicas: readonly (ReplicaState | null)[] | null;
  /** In order: the worker whose batch comes next (after the one that handed out last). */
  readonly nextWorker: number | null;
}

/** The generators a sampler (or a batch sampler's inner sampler) draws from, other than the loader's. */
export function samplerGenerators(samplers: readonly unknown[], own: Generator): Generator[] {
  const out: Generator[] = [];
  for (let s of samplers) {
    for (let depth = 0; s !== null && typeof s === 'object' && depth < 4; depth++) {
      const g = (s as { generator?: unknown }).generator;
      if (g instanceof Generator && g !== own && !out.includes(g)) out.push(g);
      s = (s as { sampler?: unknown }).sampler;
    }
  }
  return out;
}

export interface EpochSources {
  identity: LoaderIdentity;
  generator: Generator;
  samplerGenerators: Generator[];
  persistentSeed: number | null;
  persistent: boolean;
  /** Replicas of the dataset: numWorkers, or 1 (the main process's). */
  replicaCount: number;
}

/** A request and its place in the sampler's order. */
export interface Planned {
  readonly pos: number;
  readonly req: FetchRequest;
}

export class Epoch {
  readonly start: Omit<DataLoaderState, 'yielded' | 'alsoYielded' | 'replicas' | 'nextWorker'>;
  readonly baseSeed: number;
  /** Batches an iterable dataset must load and drop before handing out more (NOTE [Resuming an epoch]). */
  discard = 0;
  readonly #requests: Iterator<FetchRequest>;
  #pos = 0;
  #prefix = 0;
  readonly #beyond = new Set<number>();
  readonly #skip = new Set<number>();
  readonly #replicas: (ReplicaState | null)[];
  #nextWorker: number | null = null;
  /** The replicas' states to load as this epoch's workers start (NOTE [Resumable datasets]); null: none. */
  readonly restore: readonly (ReplicaState | null)[] | null = null;

  constructor(src: EpochSources, makeRequests: () => Iterator<FetchRequest>, resume: DataLoaderState | null, skipInSampler: boolean) {
    this.start = {
      format: STATE_FORMAT,
      loader: src.identity,
      generator: src.generator.getState(),
      samplerGenerators: src.samplerGenerators.map((g) => g.getState()),
      persistentSeed: src.persistentSeed,
    };
    // torch: a base seed per iterator, drawn before the sampler draws; persistent workers keep theirs.
    this.baseSeed = src.persistent && src.persistentSeed !== null ? src.persistentSeed : src.generator.seed();
    this.#requests = makeRequests();
    this.#replicas = new Array<ReplicaState | null>(src.replicaCount).fill(null);
    if (resume === null) return;
    this.#prefix = resume.yielded;
    this.#nextWorker = resume.nextWorker;
    if (resume.replicas?.some((r) => r !== null)) {
      this.restore = resume.replicas;
      this.#replicas = [...resume.replicas];
    }
    if (!skipInSampler && this.restore !== null) {
      // An iterable dataset's replicas continue from their states: only the count matters.
      this.#prefix = this.#pos = resume.yielded + resume.alsoYielded.length;
    } else if (skipInSampler) {
      for (; this.#pos < resume.yielded; this.#pos++) if (this.#requests.next().done) break;
      for (const p of resume.alsoYielded) {
        this.#skip.add(p);
        this.#beyond.add(p);
      }
    } else {
      this.discard = resume.yielded;
    }
  }

  /** The next request to load, or undefined at the end of the sampler. */
  next(): Planned | undefined {
    for (;;) {
      const r = this.#requests.next();
      if (r.done) return undefined;
      const pos = this.#pos++;
      if (this.#skip.delete(pos)) continue;
      return { pos, req: r.value };
    }
  }

  /** The batch at `pos` went to the user, from replica `replica` whose state after it was `state` (NOTE [Resumable datasets]). */
  handedOut(pos: number, replica = 0, state: ReplicaState | null = null): void {
    if (state !== null) this.#replicas[replica] = state;
    this.#nextWorker = (replica + 1) % this.#replicas.length;
    if (pos !== this.#prefix) {
      this.#beyond.add(pos);
      return;
    }
    this.#prefix++;
    while (this.#beyond.delete(this.#prefix)) this.#prefix++;
  }

  /** Replica `id`'s last state (what a replaced worker starts from). */
  replica(id: number): ReplicaState | null {
    return this.#replicas[id] ?? null;
  }

  /** Replica `id`'s state as it begins the epoch (the main process's dataset, a persistent worker's). */
  setReplica(id: number, state: ReplicaState | null): void {
    if (state !== null) this.#replicas[id] = state;
  }

  /** The replicas' states: null when none has one. */
  get replicas(): (ReplicaState | null)[] | null {
    return this.#replicas.some((r) => r !== null) ? [...this.#replicas] : null;
  }

  /** In order: where the round robin resumes (null: where it stands). */
  get resumeWorker(): number | null {
    return this.restore === null ? null : this.#nextWorker;
  }

  state(): DataLoaderState {
    return {
      ...this.start,
      yielded: this.#prefix,
      alsoYielded: [...this.#beyond].sort((a, b) => a - b),
      replicas: this.replicas,
      nextWorker: this.#nextWorker,
    };
  }
}

/** Requests for an iterable dataset: "the next batch", until every replica has ended. */
export function* forever(): Iterator<FetchRequest> {
  for (;;) yield null;
}

export function checkState(state: unknown, samplerGeneratorCount: number): DataLoaderState {
  const s = state as Partial<DataLoaderState> | null;
  const bad = (why: string): BadStateDictError =>
    new BadStateDictError(`loadStateDict() takes what stateDict() returned (format ${STATE_FORMAT}): ${why}.`);
  if (s === null || typeof s !== 'object') throw bad(`got ${s === null ? 'null' : typeof s}`);
  if ((s.format as string) === 'tensorproc.DataLoader/1') {
    throw bad('it is format 1, of an earlier tensorproc, which does not say which loader it came from: take a new one with stateDict()');
  }
  if (s.format !== STATE_FORMAT) throw bad(`its format is ${JSON.stringify(s.format)}`);
  if (!isIdentity(s.loader)) throw bad('its `loader` (which loader it was taken from) is missing or malformed');
  if (!Number.isInteger(s.yielded) || s.yielded! < 0) throw bad('yielded is not a count of batches');
  if (!Array.isArray(s.alsoYielded) || !s.alsoYielded.every((p) => Number.isInteger(p) && p > s.yielded!)) {
    throw bad('alsoYielded is not a list of places after yielded');
  }
  if (!isReplicaList(s.replicas) || (s.replicas !== null && s.replicas.length !== Math.max(1, s.loader.numWorkers))) {
    throw bad('replicas is not a list of dataset states, one per worker');
  }
  if (s.nextWorker !== null && !(Number.isInteger(s.nextWorker) && s.nextWorker! >= 0)) throw bad('nextWorker is not a worker id');
  if (!Array.isArray(s.samplerGenerators) || s.samplerGenerators.length !== samplerGeneratorCount) {
    throw bad(
      `it holds ${Array.isArray(s.samplerGenerators) ? s.samplerGenerators.length : 'no'} sampler generators, this loader's samplers have ${samplerGeneratorCount}: it was made for another loader`,
    );
  }
  try {
    new Generator(0).setState(s.generator);
    for (const g of s.samplerGenerators) new Generator(0).setState(g);
    if (s.persistentSeed !== null) checkSeed(s.persistentSeed, 'persistentSeed');
  } catch (e) {
    throw bad((e as Error).message);
  }
  return s as DataLoaderState;
}
