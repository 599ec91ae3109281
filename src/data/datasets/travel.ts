// How the composed datasets travel (NOTE [Datasets that travel]): a reduction per class, whose
// state names its parts; tensors (and any other registered object, in an array part or a
// target's args) go by reference into the message table, so they travel as handles. Loaded
// by src/programs/reductions.ts, so that any child can rebuild them.
import { DatasetNeedsTargetError, FrameDecodeError } from '../../errors.js';
import { Tensor } from '../../tensor/index.js';
import { registerReduction, type RebuildContext, type ReduceContext } from '../../transport/index.js';
import { reductionFor } from '../../transport/registry.js';
import { ChainDataset } from './chain.js';
import { ComposedDataset, Part, type ResolvedTarget } from './composed.js';
import { ConcatDataset } from './concat.js';
import { StackDataset } from './stack.js';
import { Subset } from './subset.js';
import { TensorDataset } from './tensor-dataset.js';

/** A value with the registered objects inside it swapped for table references. */
type Packed = ['v', unknown] | ['r', number] | ['a', Packed[]] | ['o', [string, Packed][]];

function pack(v: unknown, ctx: ReduceContext, seen: Set<object>): Packed {
  if (v === null || typeof v !== 'object') return ['v', v];
  if (reductionFor(v) !== undefined) return ['r', ctx.ref(v)];
  const proto = Object.getPrototypeOf(v);
  const plain = Array.isArray(v) || proto === Object.prototype || proto === null;
  if (!plain) return ['v', v]; // typed arrays, dates, maps…: the serializer's
  if (seen.has(v)) throw new DatasetNeedsTargetError('A dataset part refers to itself (a cycle): it cannot be sent to another process.');
  seen.add(v);
  try {
    const parts: Packed[] | [string, Packed][] = Array.isArray(v)
      ? v.map((x) => pack(x, ctx, seen))
      : Object.entries(v).map(([k, x]) => [k, pack(x, ctx, seen)] as [string, Packed]);
    // Nothing registered inside: the value as it is.
    const flat = (Array.isArray(v) ? (parts as Packed[]) : (parts as [string, Packed][]).map((e) => e[1])).every((p) => p[0] === 'v');
    if (flat) return ['v', v];
    return Array.isArray(v) ? ['a', parts as Packed[]] : ['o', parts as [string, Packed][]];
  } finally {
    seen.delete(v);
  }
}

function unpack(p: unknown, ctx: RebuildContext): unknown {
  if (!Array.isArray(p) || p.length !== 2) throw malformed();
  switch (p[0]) {
    case 'v':
      return p[1];
    case 'r':
      return ctx.get(p[1] as number);
    case 'a':
      return (p[1] as unknown[]).map((x) => unpack(x, ctx));
    case 'o':
      return Object.fromEntries((p[1] as [string, unknown][]).map(([k, x]) => [k, unpack(x, ctx)]));
    default:
      throw malformed();
  }
}

function malformed(): FrameDecodeError {
  return new FrameDecodeError('A received dataset entry is malformed.');
}

type PartState = ['t', string, string | null, Packed] | ['d', number] | ['a', Packed];

function reducePart(part: Part, at: string, ctx: ReduceContext): PartState {
  if (part.target !== null) {
    const t = part.target;
    const module = t.module instanceof URL ? t.module.href : t.module;
    return ['t', module, t.export ?? null, pack(t.args ?? [], ctx, new Set())];
  }
  if (part.given instanceof ComposedDataset) return ['d', ctx.ref(part.given)];
  if (Array.isArray(part.given)) return ['a', pack(part.given, ctx, new Set())];
  throw new DatasetNeedsTargetError(
    `This dataset cannot be sent to another process: ${part.travelProblem(at)}. Build it over shared tensors, dataset targets or arrays.`,
  );
}

function rebuildPart(s: unknown, ctx: RebuildContext): Part {
  if (!Array.isArray(s)) throw malformed();
  if (s[0] === 't' && s.length === 4 && typeof s[1] === 'string') {
    const t: ResolvedTarget = { module: s[1], export: (s[2] as string | null) ?? 'default', args: unpack(s[3], ctx) as unknown[] };
    return new Part(null, '', t);
  }
  if (s[0] === 'd' && s.length === 2) {
    const d = ctx.get(s[1] as number);
    if (!(d instanceof ComposedDataset)) throw malformed();
    return new Part(d, '');
  }
  if (s[0] === 'a' && s.length === 2) return new Part(unpack(s[1], ctx), '');
  throw malformed();
}

const partsOf = (d: ComposedDataset, ctx: ReduceContext): PartState[] => d.parts.map((p, k) => reducePart(p, `part ${k}`, ctx));
const rebuildParts = (s: unknown, ctx: RebuildContext): Part[] => {
  if (!Array.isArray(s)) throw malformed();
  return s.map((x) => rebuildPart(x, ctx));
};

registerReduction<TensorDataset>({
  name: 'data.TensorDataset',
  type: TensorDataset,
  reduce: (d, ctx) => d.tensors.map((t) => ctx.ref(t)),
  rebuild(state, ctx) {
    if (!Array.isArray(state)) throw malformed();
    const tensors = state.map((k) => ctx.get(k as number));
    if (!tensors.every((t) => t instanceof Tensor)) throw malformed();
    return new TensorDataset(...(tensors as Tensor[]));
  },
});

registerReduction<Subset>({
  name: 'data.Subset',
  type: Subset,
  reduce: (d, ctx) => [partsOf(d, ctx), d.indices],
  rebuild(state, ctx) {
    if (!Array.isArray(state) || state.length !== 2) throw malformed();
    const [part] = rebuildParts(state[0], ctx);
    return new Subset(part as never, state[1] as number[]);
  },
});

registerReduction<ConcatDataset>({
  name: 'data.ConcatDataset',
  type: ConcatDataset,
  reduce: (d, ctx) => partsOf(d, ctx),
  rebuild: (state, ctx) => new ConcatDataset(rebuildParts(state, ctx) as never[]),
});

registerReduction<ChainDataset>({
  name: 'data.ChainDataset',
  type: ChainDataset,
  reduce: (d, ctx) => partsOf(d, ctx),
  rebuild: (state, ctx) => new ChainDataset(rebuildParts(state, ctx) as never[]),
});

registerReduction<StackDataset>({
  name: 'data.StackDataset',
  type: StackDataset,
  reduce: (d, ctx) => [d.keys, partsOf(d, ctx)],
  rebuild(state, ctx) {
    if (!Array.isArray(state) || state.length !== 2) throw malformed();
    const parts = rebuildParts(state[1], ctx);
    const keys = state[0] as string[] | null;
    if (keys === null) return new StackDataset(...(parts as never[]));
    if (!Array.isArray(keys) || keys.length !== parts.length) throw malformed();
    return new StackDataset(Object.fromEntries(keys.map((k, i) => [k, parts[i]])) as never);
  },
});
