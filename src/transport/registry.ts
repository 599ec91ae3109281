// The reduce/rebuild registry, as torch's multiprocessing/reductions.py: each type that can
// travel in a message registers how to turn an object into plain state plus descriptors
// (reduce) and how to make an object again from them in the receiving process (rebuild).
// The transport knows no type beyond this table.
//
// NOTE [Message table]
// A message is its value with every registered object replaced by a reference into a table
// (see walk.ts and serializer.ts). Table entries are [name, state]; a state may refer to other
// entries by index (a tensor refers to its storage), which is how two views of one storage
// travel over one storage: `ref()` reduces each object once per message. Descriptors are
// listed per message in the order `fd()` was called and travel with the datagram.
// Ownership: a reducer lends its descriptors (they must stay open until the message is sent;
// the transport duplicates them if it must keep the message); a rebuilder *takes* each
// descriptor it asks for with `takeFd()`, and the transport closes every descriptor nobody
// took. A reducer that takes something that must be given back if the message is never sent
// (an in-flight reference) registers the undo with `onAbandon()`; a state that is received but
// cannot be rebuilt (another entry failed) is passed to `discard()`, which must let go of it.
import { InvalidArgumentError } from '../errors.js';

export interface ReduceContext {
  /**
   * How many receivers this message goes to (spawn arguments go to every child): a reducer
   * that adds an in-flight reference adds this many.
   */
  readonly copies: number;
  /** Attaches a descriptor to the message (borrowed, see NOTE [Message table]); returns its index. */
  fd(fd: number): number;
  /** Reduces another registered object into this message (once per message); returns its table index. */
  ref(obj: object): number;
  /** Runs `undo` if the message is not sent after all. */
  onAbandon(undo: () => void): void;
}

export interface RebuildContext {
  /** The descriptor at `index`, now owned by the caller. Each index may be taken once. */
  takeFd(index: number): number;
  /**
   * takeFd() for a storage: pieces of one slab in one message share its descriptor (NOTE
   * [Packed small storages]), so a descriptor taken already by this message is null here.
   */
  takeSharedFd(index: number): number | null;
  /** The rebuilt object at table index `index`. */
  get(index: number): object;
}

export interface Reduction<T extends object = object> {
  /** Stable name written in messages: never reuse one for a different layout. */
  readonly name: string;
  /** The class (objects of subclasses travel the same way). */
  readonly type: Function & { readonly prototype: T };
  reduce(obj: T, ctx: ReduceContext): unknown;
  rebuild(state: unknown, ctx: RebuildContext): T;
  /** Lets go of a received state that will not be rebuilt (its descriptors are closed anyway). */
  discard?(state: unknown, ctx: RebuildContext): void;
}

const byType = new Map<Function, Reduction>();
const byName = new Map<string, Reduction>();

/** Registers how objects of `r.type` (and its subclasses) travel. */
export function registerReduction<T extends object>(r: Reduction<T>): void {
  const old = byName.get(r.name);
  if (old !== undefined && old.type !== r.type)
    throw new InvalidArgumentError(`A reduction named '${r.name}' is already registered for another type.`);
  byType.set(r.type, r as unknown as Reduction);
  byName.set(r.name, r as unknown as Reduction);
}

/** The reduction for `obj`, or undefined for a value the serializer takes as it is. */
export function reductionFor(obj: object): Reduction | undefined {
  const direct = byType.get(obj.constructor);
  if (direct !== undefined || byType.size === 0) return direct;
  // A subclass of a registered type: rarely taken, so a linear scan is fine.
  if (Object.getPrototypeOf(obj) === Object.prototype || Array.isArray(obj)) return undefined;
  for (const [type, r] of byType) if (obj instanceof type) return r;
  return undefined;
}

export function reductionNamed(name: string): Reduction | undefined {
  return byName.get(name);
}
