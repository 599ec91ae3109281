// DataLoader (API.md, "Data loading"): torch.utils.data.DataLoader for tensorproc. This file
// holds what every iteration shares (the dataset, the samplers, the epoch and its state);
// in-process.ts loads in this process, the worker files in worker processes.
import { InvalidArgumentError, NoLengthError } from '../errors.js';
import {
  checkDatasetTarget,
  classify,
  isDatasetTarget,
  needsModuleTarget,
  needsTarget,
  type Dataset,
  type DatasetKind,
  type DatasetTarget,
  type MapDataset,
} from './dataset.js';
import { Epoch, STATE_FORMAT, checkState, forever, samplerGenerators, type DataLoaderState } from './epoch.js';
import type { FetchRequest } from './fetch.js';
import type { Generator } from './generator.js';
import { loadInProcess } from './in-process.js';
import { pinBatch } from './pin.js';
import { checkKind, parseOptions, type DataLoaderOptions, type Settings } from './options.js';
import { disposable } from './release.js';
import { BatchSampler, RandomSampler, SequentialSampler } from './sampler.js';
import type { FunctionTarget } from './target.js';
import type { WorkerSpec } from './messages.js';
import { LoaderWorkers } from './workers.js';
import { buildSource, checkTravels, isComposed } from './datasets/source.js';
import { checkIdentity, identify, type LoaderIdentity } from './state-identity.js';
import { snapshot, type ReplicaState } from './dataset-state.js';
import { LoaderStats, type DataLoaderStats } from './loader-stats.js';
import { resolveTarget } from '../process/target.js';
import { placeRemoteWorkers, underRoot } from './cluster-link.js';

export class DataLoader<B = unknown> implements AsyncIterable<B> {
  readonly #source: Dataset | DatasetTarget;
  readonly #settings: Settings;
  #built: { dataset: Dataset; kind: DatasetKind } | null = null;
  #building: Promise<void> | null = null;
  #indexSampler: Iterable<FetchRequest> | null = null;
  #samplerGenerators: Generator[] = [];
  #persistentSeed: number | null = null;
  /** The epoch running or last broken off; null once one ran to its end (NOTE [Resuming an epoch]). */
  #epoch: Epoch | null = null;
  /** An iteration is running (persistent workers serve one at a time). */
  #busy = false;
  /** The workers of the running (or, persistent, the last) iteration. */
  #workers: LoaderWorkers | null = null;
  /** The workers' targets, resolved once. */
  #targets: Promise<Pick<WorkerSpec, 'dataset' | 'collate' | 'workerInit'>> | null = null;
  /** A loaded state waiting for the next iteration. */
  #resume: DataLoaderState | null = null;
  /** Persistent workers between epochs: their datasets' states (NOTE [Resumable datasets]). */
  #carried: (ReplicaState | null)[] | null = null;
  readonly #stats = new LoaderStats();

  constructor(dataset: Dataset | DatasetTarget, options?: DataLoaderOptions) {
    const s = parseOptions(options);
    this.#settings = s;
    // On a cluster, a module named by a path is under cluster.root, as for the cluster Pool's targets.
    this.#source = s.cluster !== null && isDatasetTarget(dataset) ? underRoot(dataset, s.cluster) : dataset;
    this.#samplerGenerators = samplerGenerators([s.sampler, s.batchSampler], s.generator);
    if (isDatasetTarget(dataset)) {
      checkDatasetTarget(dataset);
    } else if (isComposed(dataset) && s.cluster !== null) {
      throw needsModuleTarget();
    } else if (isComposed(dataset)) {
      // NOTE [Datasets that travel]: sent to the workers as handles; its targets built by ready().
      if (s.numWorkers > 0) checkTravels(dataset);
      if (dataset.isBuilt) this.#setBuilt(classify(dataset, 'The dataset given to DataLoader'));
    } else {
      if (s.numWorkers > 0) throw needsTarget('dataset');
      this.#setBuilt(classify(dataset, 'The dataset given to DataLoader'));
    }
    if (s.numWorkers > 0 && typeof s.collate === 'function') throw needsTarget('collate');
    if (s.numWorkers > 0 && typeof s.workerInit === 'function') throw needsTarget('workerInit');
  }

  #setBuilt(built: { dataset: Dataset; kind: DatasetKind }): void {
    checkKind(this.#settings, built.kind);
    this.#built = built;
    const s = this.#settings;
    if (built.kind === 'iterable') {
      this.#indexSampler = null;
    } else if (s.batchSampler !== undefined) {
      this.#indexSampler = s.batchSampler;
    } else {
      const dataset = built.dataset as MapDataset;
      const sampler = s.sampler ?? (s.shuffle ? new RandomSampler(dataset, { generator: s.generator }) : new SequentialSampler(dataset));
      // batchSize null: each element as it is, a list of indices included (bulk loading).
      this.#indexSampler = s.batchSize === null ? sampler : new BatchSampler(sampler as Iterable<number>, s.batchSize, s.dropLast);
    }
  }

  /** Builds a dataset target in this process (the main process needs its length and kind). Iterating calls it. */
  ready(): Promise<this> {
    if (this.#built !== null) return Promise.resolve(this);
    this.#building ??= buildSource(this.#source as DatasetTarget)
      .then((b) => this.#setBuilt(b))
      .finally(() => {
        this.#building = null;
      });
    return this.#building.then(() => this);
  }

  /** The dataset as the main process sees it (a target's is built by ready()). */
  get dataset(): Dataset {
    if (this.#built === null) throw notBuilt('dataset');
    return this.#built.dataset;
  }

  /** Batches in one epoch (torch's len(loader)): the batch sampler's length, or an iterable dataset's length over batchSize. */
  get length(): number {
    if (this.#built === null) throw notBuilt('length');
    const s = this.#settings;
    if (this.#built.kind === 'iterable') {
      const n = (this.#built.dataset as { length?: unknown }).length;
      if (typeof n !== 'number') {
        throw new NoLengthError(
          'This iterable dataset has no length, so neither has the loader: give the dataset a `length` property (samples), or count batches as they come.',
        );
      }
      if (s.batchSize === null) return n;
      return s.dropLast ? Math.floor(n / s.batchSize) : Math.ceil(n / s.batchSize);
    }
    const n = (this.#indexSampler as { length?: unknown }).length;
    if (typeof n !== 'number')
      throw new NoLengthError('The sampler given has no length, so neither has the loader: give it a `length` property.');
    return n;
  }

  get numWorkers(): number {
    return this.#settings.numWorkers;
  }

  get batchSize(): number | null {
    return this.#settings.batchSampler !== undefined ? null : this.#settings.batchSize;
  }

  [Symbol.asyncIterator](): AsyncIterator<B> {
    return this.#iterate() as AsyncIterator<B>;
  }

  async *#iterate(): AsyncGenerator<unknown> {
    await this.ready();
    const s = this.#settings;
    if (s.persistentWorkers && this.#busy) {
      throw new InvalidArgumentError(
        "This loader's persistent workers are serving another iteration: finish it, or break out of it, before starting the next.",
      );
    }
    this.#busy = true;
    try {
      const { dataset, kind } = this.#built!;
      const epoch = this.#beginEpoch(kind);
      // Only default collate's batches are made for the step (defaultConvert's samples may be the dataset's own).
      const plain = s.collate === undefined && s.batchSize !== null ? disposable : (b: unknown) => b;
      const wrap = s.pinMemory ? (b: unknown) => plain(pinBatch(b)) : plain;
      if (s.numWorkers === 0) {
        yield* loadInProcess(epoch, dataset, kind, s, wrap, () => this.#endEpoch(epoch), this.#stats);
      } else {
        const workers = await this.#workersFor(epoch, kind);
        yield* workers.run(epoch, wrap, () => this.#endEpoch(epoch));
      }
    } finally {
      this.#busy = false;
    }
  }

  /** The workers of this epoch: the persistent ones if they fit (same base seed, not failed), else new ones. */
  async #workersFor(epoch: Epoch, kind: DatasetKind): Promise<LoaderWorkers> {
    const s = this.#settings;
    const old = this.#workers;
    // Parked workers cannot load replicas' states: a resumed epoch with them starts new ones.
    if (old !== null && s.persistentWorkers && old.usable && old.baseSeed === epoch.baseSeed && epoch.restore === null) return old;
    if (old !== null && s.persistentWorkers) await old.stop();
    const spec = await this.#spec(kind, epoch.baseSeed);
    // NOTE [Cluster loader]: the slots taken first; a refusal (no agents, a target outside the root) ends the iteration here.
    const remote = s.cluster === null ? null : await placeRemoteWorkers({ numWorkers: s.numWorkers, cluster: s.cluster, spec });
    let workers: LoaderWorkers;
    try {
      workers = new LoaderWorkers({
        spec,
        prefetchFactor: s.prefetchFactor,
        inOrder: s.inOrder,
        timeout: s.timeout,
        persistent: s.persistentWorkers,
        maxWorkerRestarts: s.maxWorkerRestarts,
        startMethod: s.startMethod,
        restore: epoch.restore,
        stats: this.#stats,
        makeSet: remote === null ? undefined : (o, fail) => remote.bind(o, fail),
      });
    } catch (e) {
      await remote?.stop();
      throw e;
    }
    this.#workers = workers;
    return workers;
  }

  /** What every worker is started with: the targets resolved to file: URLs here, once. */
  async #spec(kind: DatasetKind, baseSeed: number): Promise<WorkerSpec> {
    this.#targets ??= (async () => {
      const s = this.#settings;
      const resolve = async (t: FunctionTarget | undefined) => {
        if (t === undefined) return null;
        const { url, exportName } = await resolveTarget(s.cluster === null ? t : underRoot(t, s.cluster));
        return { module: url, export: exportName };
      };
      const source = this.#source as DatasetTarget;
      return {
        dataset: isComposed(source) ? source : { ...(await resolve(source))!, args: source.args ?? [] },
        collate: await resolve(s.collate as FunctionTarget | undefined),
        workerInit: await resolve(s.workerInit as FunctionTarget | undefined),
      };
    })();
    const s = this.#settings;
    return {
      ...(await this.#targets),
      kind,
      batchSize: s.batchSize,
      dropLast: s.dropLast,
      releaseSamples: s.releaseSamples,
      numWorkers: s.numWorkers,
      baseSeed,
    };
  }

  /** Counts and timings of the loader's batches (API.md, "Observability"): cheap, a new plain object each call. */
  stats(): DataLoaderStats {
    const w = this.#workers;
    return this.#stats.read(w?.queued ?? 0, (id) => (w?.usable ? w.pid(id) : null));
  }

  /** The pids of the workers running now (empty when loading in this process, or between non-persistent epochs). */
  get workerPids(): number[] {
    return this.#workers?.usable ? this.#workers.pids : [];
  }

  #beginEpoch(kind: DatasetKind): Epoch {
    const s = this.#settings;
    const resume = this.#resume;
    this.#resume = null;
    if (resume !== null) {
      checkIdentity(resume.loader, this.#identity(), resume.replicas !== null);
      s.generator.setState(resume.generator);
      resume.samplerGenerators.forEach((g, k) => this.#samplerGenerators[k]!.setState(g));
      this.#persistentSeed = resume.persistentSeed;
    }
    const sampler = this.#indexSampler;
    const epoch = new Epoch(
      {
        identity: this.#identity(),
        generator: s.generator,
        samplerGenerators: this.#samplerGenerators,
        persistentSeed: this.#persistentSeed,
        persistent: s.persistentWorkers,
        replicaCount: Math.max(1, s.numWorkers),
      },
      kind === 'map' ? () => sampler![Symbol.iterator]() : forever,
      resume,
      kind === 'map',
    );
    if (s.persistentWorkers) this.#persistentSeed = epoch.baseSeed;
    this.#epoch = epoch;
    return epoch;
  }

  #endEpoch(epoch: Epoch): void {
    if (this.#epoch === epoch) this.#epoch = null;
    // Persistent workers keep their replicas: the next epoch starts with their datasets' states (iterators start over).
    const kept = this.#settings.persistentWorkers
      ? epoch.replicas?.map((r) => (r?.dataset === undefined ? null : { dataset: r.dataset }))
      : null;
    this.#carried = kept?.some((r) => r !== null) ? kept : null;
  }

  /**
   * Where iteration stands, to resume it with loadStateDict() (in this or a new loader made
   * with the same dataset and options): mid-epoch, the epoch that is running or was broken
   * off; otherwise the start of the next one. Plain JSON.
   */
  stateDict(): DataLoaderState {
    if (this.#resume !== null) return this.#resume;
    if (this.#epoch !== null) return this.#epoch.state();
    const s = this.#settings;
    return {
      format: STATE_FORMAT,
      loader: this.#identity(),
      generator: s.generator.getState(),
      samplerGenerators: this.#samplerGenerators.map((g) => g.getState()),
      persistentSeed: this.#persistentSeed,
      yielded: 0,
      alsoYielded: [],
      replicas: this.#replicasBetweenEpochs(),
      nextWorker: null,
    };
  }

  /** The next iteration resumes where `state` was taken: same order, same seeds, the batches handed out skipped. */
  loadStateDict(state: DataLoaderState): void {
    const checked = checkState(state, this.#samplerGenerators.length);
    // A dataset target not built yet: its length is known, and the identity checked, as the next iteration begins.
    if (this.#built !== null) checkIdentity(checked.loader, this.#identity(), checked.replicas !== null);
    this.#resume = checked;
  }

  /** Between epochs, what outlives one: the main process's dataset (numWorkers 0), persistent workers' (NOTE [Resumable datasets]). */
  #replicasBetweenEpochs(): (ReplicaState | null)[] | null {
    if (this.#settings.numWorkers > 0) return this.#carried;
    const own = snapshot(this.#built!.dataset, null);
    return own === null ? null : [own];
  }

  /** What identifies this loader in its state dicts (NOTE [Whose state dict]). */
  #identity(): LoaderIdentity {
    if (this.#built === null) throw notBuilt('state dict');
    const s = this.#settings;
    return identify(
      { ...this.#built, batchSize: this.batchSize, dropLast: s.dropLast, numWorkers: s.numWorkers },
      s.batchSampler ?? s.sampler ?? this.#indexSampler,
    );
  }

  /** Stops the workers a persistent loader keeps (an iteration still running fails with ERR_TP_DATALOADER_CLOSED). The loader can be iterated again: workers start anew. */
  async close(): Promise<void> {
    const w = this.#workers;
    this.#workers = null;
    await w?.stop();
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }
}

function notBuilt(what: string): NoLengthError {
  return new NoLengthError(
    `The loader's ${what} is not known yet: its dataset target is built by \`await loader.ready()\` (or the first iteration).`,
  );
}
