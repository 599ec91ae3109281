// The two sides of a message's object table (NOTE [Message table] in registry.ts): the
// Reducer collects what a message refers to and the descriptors it carries; the Rebuilder
// turns a received table back into objects and owns the descriptors until they are taken.
import { addon } from '../native/index.js';
import { FrameDecodeError, NotTransferableError } from '../errors.js';
import { reductionFor, type Reduction, type ReduceContext, type RebuildContext } from './registry.js';

export class Reducer implements ReduceContext {
  readonly table: object[];
  readonly names: string[] = [];
  readonly states: unknown[] = [];
  readonly fdList: number[] = [];
  readonly #fdIndex = new Map<number, number>();
  readonly #index = new Map<object, number>();
  readonly undo: (() => void)[] = [];

  constructor(
    objects: object[],
    readonly copies: number,
  ) {
    this.table = objects.slice();
    objects.forEach((o, k) => this.#index.set(o, k));
  }

  reduceAll(): void {
    for (let k = 0; k < this.table.length; k++) if (this.names[k] === undefined) this.#reduce(k);
  }

  #reduce(k: number): void {
    const obj = this.table[k]!;
    const r = reductionFor(obj)!;
    this.names[k] = r.name;
    this.states[k] = undefined; // reserve the slot
    this.states[k] = r.reduce(obj, this);
  }

  fd(fd: number): number {
    let i = this.#fdIndex.get(fd);
    if (i === undefined) {
      i = this.fdList.length;
      this.fdList.push(fd);
      this.#fdIndex.set(fd, i);
    }
    return i;
  }

  ref(obj: object): number {
    let k = this.#index.get(obj);
    if (k !== undefined) return k;
    if (reductionFor(obj) === undefined)
      throw new NotTransferableError(
        `A ${obj.constructor?.name ?? 'value'} is not a registered type and cannot be referred to.`,
        '(message)',
      );
    k = this.table.length;
    this.table.push(obj);
    this.#index.set(obj, k);
    this.#reduce(k);
    return k;
  }

  onAbandon(undo: () => void): void {
    this.undo.push(undo);
  }

  abandon(): void {
    for (const u of this.undo.splice(0)) {
      try {
        u();
      } catch {
        // best effort: the others must still run
      }
    }
  }
}

export class Rebuilder implements RebuildContext {
  readonly #fds: readonly number[];
  readonly #taken: boolean[];
  objects: object[] = [];
  #pending: { r: Reduction; state: unknown }[] = [];
  #busy = new Set<number>();

  constructor(fds: readonly number[]) {
    this.#fds = fds;
    this.#taken = fds.map(() => false);
  }

  takeFd(index: number): number {
    if (!Number.isInteger(index) || index < 0 || index >= this.#fds.length || this.#taken[index]) {
      throw new FrameDecodeError(`A message refers to descriptor ${index} but carries ${this.#fds.length} (or uses one twice).`);
    }
    this.#taken[index] = true;
    return this.#fds[index]!;
  }

  takeSharedFd(index: number): number | null {
    if (Number.isInteger(index) && index >= 0 && index < this.#fds.length && this.#taken[index]) return null;
    return this.takeFd(index);
  }

  get fdCount(): number {
    return this.#fds.length;
  }

  get(index: number): object {
    if (!Number.isInteger(index) || index < 0 || index >= this.#pending.length) {
      throw new FrameDecodeError(`A message refers to object ${index} of a table of ${this.#pending.length}.`);
    }
    const done = this.objects[index];
    if (done !== undefined) return done;
    if (this.#busy.has(index)) throw new FrameDecodeError('A message table refers to itself in a cycle.');
    this.#busy.add(index);
    const { r, state } = this.#pending[index]!;
    const obj = r.rebuild(state, this);
    this.objects[index] = obj;
    return obj;
  }

  rebuildAll(pending: { r: Reduction; state: unknown }[]): void {
    this.#pending = pending;
    try {
      for (let k = 0; k < pending.length; k++) this.get(k);
    } catch (e) {
      // Let go of what will not be rebuilt, so that no in-flight reference is left behind.
      for (let k = 0; k < pending.length; k++) {
        if (this.objects[k] !== undefined || this.#busy.has(k)) continue;
        try {
          pending[k]!.r.discard?.(pending[k]!.state, this);
        } catch {
          // best effort
        }
      }
      throw e;
    }
  }

  closeUntaken(): void {
    for (let i = 0; i < this.#fds.length; i++) {
      if (this.#taken[i]) continue;
      this.#taken[i] = true;
      try {
        addon.close(this.#fds[i]!);
      } catch {
        // already closed
      }
    }
  }
}
