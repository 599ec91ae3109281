// The base of the datasets of torch.utils.data.dataset (TensorDataset, Subset, ConcatDataset,
// ChainDataset, StackDataset): datasets made of other datasets, which a DataLoader's workers
// can receive.
//
// NOTE [Datasets that travel]
// torch pickles a dataset to each worker; a JavaScript object cannot cross to another process,
// which is why a DataLoader with workers otherwise needs a dataset target. These classes can
// travel, because what they are made of can: shared tensors (as handles, never copied), dataset
// targets (each worker builds its own replica, as for a target given to the loader), plain
// arrays (copied, as torch pickles a list), and other datasets of these classes. Each class
// registers a reduction (travel.ts) whose state names its parts; the receiver rebuilds the
// same tree, and `ready()` there builds the targets in it. A part that is any other object (a
// user's { length, getItem }) cannot travel: the DataLoader refuses it at construction with
// ERR_TP_DATASET_NEEDS_TARGET, naming where it is; with numWorkers 0 anything goes.
// A part given as a target is built by `ready()` (the DataLoader calls it): until then what
// needs its length (ConcatDataset's offsets, StackDataset's check) waits, and getItem throws
// ERR_TP_NO_LENGTH saying to await ready().
import { IndexOutOfRangeError, InvalidArgumentError, NoLengthError } from '../../errors.js';
import { resolveTarget } from '../../process/target.js';
import {
  buildDataset,
  checkDatasetTarget,
  classify,
  isDatasetTarget,
  type Dataset,
  type DatasetKind,
  type DatasetTarget,
} from '../dataset.js';

/** A dataset target as it travels: its module resolved to a file: URL by the sender. */
export interface ResolvedTarget {
  module: string;
  export: string;
  args: readonly unknown[];
}

/** What a part of a composed dataset may be given as. */
export type DatasetSource = Dataset | DatasetTarget | readonly unknown[];

/** One part of a composed dataset: built (usable here), or a target still to build. */
export class Part {
  /** The target this part was given as (resolved once built), or null. */
  target: DatasetTarget | ResolvedTarget | null;
  /** The value given, when not a target: a composed dataset, an array, or another object. */
  readonly given: unknown;
  #built: { dataset: Dataset; kind: DatasetKind } | null = null;
  #building: Promise<void> | null = null;

  /** `resolved`: a part rebuilt in a receiving process from a target as it travels (built by ready() there). */
  constructor(source: unknown, where: string, resolved?: ResolvedTarget) {
    if (resolved !== undefined) {
      this.target = resolved;
      this.given = null;
    } else if (isDatasetTarget(source)) {
      checkDatasetTarget(source);
      this.target = source;
      this.given = null;
    } else {
      this.target = null;
      this.given = source;
      // A composed dataset is read through itself (its length may wait for its own targets).
      if (!(source instanceof ComposedDataset)) this.#built = classify(source, where);
    }
  }

  get isBuilt(): boolean {
    return this.given instanceof ComposedDataset ? this.given.isBuilt : this.#built !== null;
  }

  /** Builds a target part (its module imported here) and any composed dataset inside. */
  async ready(): Promise<void> {
    if (this.given instanceof ComposedDataset) {
      await this.given.ready();
      return;
    }
    if (this.#built !== null) return;
    this.#building ??= (async () => {
      const t = this.target!;
      const { url, exportName } = await resolveTarget(t);
      const resolved: ResolvedTarget = { module: url, export: exportName, args: t.args ?? [] };
      this.#built = await buildDataset(resolved);
      this.target = resolved;
    })().finally(() => {
      this.#building = null;
    });
    await this.#building;
  }

  get dataset(): Dataset {
    if (this.given instanceof ComposedDataset) return this.given as unknown as Dataset;
    if (this.#built === null) throw notReady();
    return this.#built.dataset;
  }

  get kind(): DatasetKind {
    if (this.given instanceof ComposedDataset) return this.given.kind;
    if (this.#built === null) throw notReady();
    return this.#built.kind;
  }

  /** A map-style part's length, or an iterable's when it has one (else undefined). */
  get length(): number | undefined {
    const n = (this.dataset as { length?: unknown }).length;
    return typeof n === 'number' ? n : undefined;
  }

  /** Why this part cannot travel to another process (its path in `at`), or null when it can. */
  travelProblem(at: string): string | null {
    if (this.target !== null) return null;
    if (this.given instanceof ComposedDataset) return this.given.travelProblem(at);
    if (Array.isArray(this.given)) return null;
    const name = (this.given as object | null)?.constructor?.name;
    return `${at} is an object of this process (${name && name !== 'Object' ? `a ${name}` : 'a plain object'})`;
  }
}

function notReady(): NoLengthError {
  return new NoLengthError(
    'This dataset is made over a dataset target that is not built yet: `await dataset.ready()` first (a DataLoader does it when iterated, or by `await loader.ready()`).',
  );
}

/** A part from what a constructor was given (a Part as is: rebuilt ones, travel.ts). */
export function toPart(source: unknown, where: string): Part {
  return source instanceof Part ? source : new Part(source, where);
}

/** Base of the composed datasets: the parts, building them, and whether they can travel. */
export abstract class ComposedDataset {
  /** The parts, in order (for a StackDataset of an object, in the order of its keys). */
  abstract readonly parts: readonly Part[];
  /** Map-style (getItem) or iterable (ChainDataset). */
  abstract readonly kind: DatasetKind;
  #checked = false;

  /** True once every part is usable here (targets built). */
  get isBuilt(): boolean {
    return this.parts.every((p) => p.isBuilt);
  }

  /** Builds the dataset targets this dataset is made over, in this process; resolves to the dataset. */
  async ready(): Promise<this> {
    await Promise.all(this.parts.map((p) => p.ready()));
    this.checkBuilt();
    return this;
  }

  /** The checks that need the parts built (lengths, kinds): run once, when they all are. */
  protected checkBuilt(): void {
    if (this.#checked || !this.isBuilt) return;
    this.check();
    this.#checked = true;
  }

  /** Subclasses: checks on the built parts (called once, from the constructor or ready()). */
  protected check(): void {}

  /** Throws ERR_TP_NO_LENGTH until every part is built. */
  protected needBuilt(): void {
    if (!this.#checked) {
      if (!this.isBuilt) throw notReady();
      this.checkBuilt();
    }
  }

  /** Why this dataset cannot be sent to another process, or null when it can (NOTE [Datasets that travel]). */
  travelProblem(at = 'the dataset'): string | null {
    for (let k = 0; k < this.parts.length; k++) {
      const p = this.parts[k]!.travelProblem(`${at}.${this.partName(k)}`);
      if (p !== null) return p;
    }
    return null;
  }

  /** How part k is named in messages (`datasets[1]`). */
  protected abstract partName(k: number): string;
}

/** Normalises a torch-style index (negative counts from the end) against `n`, or throws. */
export function itemIndex(index: unknown, n: number, what: string): number {
  if (typeof index !== 'number' || !Number.isInteger(index)) {
    throw new InvalidArgumentError(`${what}: an index must be an integer (got ${String(index)}).`);
  }
  const i = index < 0 ? index + n : index;
  if (i < 0 || i >= n) throw new IndexOutOfRangeError(`${what}: index ${index} is out of range for a dataset of ${n} items.`);
  return i;
}
