// A cluster loader's worker spec as it travels (NOTE [Cluster loader]): the dataset, collate
// and workerInit targets, resolved to file: URLs by the head's loader, become paths under the
// code root (or package specifiers), and each agent resolves them under its own --root, as
// the cluster Pool does with its targets (pool-wire.ts).
import { resolve, sep } from 'node:path';
import * as mp from '../index.js';
import type { WorkerSpec } from '../data/messages.js';
import type { WireTarget } from './protocol.js';
import { targetHere, wireTarget } from './pool-wire.js';

type Here = { module: string; export: string };

export type WireSpec = Omit<WorkerSpec, 'dataset' | 'collate' | 'workerInit'> & {
  dataset: WireTarget & { args: readonly unknown[] };
  collate: WireTarget | null;
  workerInit: WireTarget | null;
};

/** The spec for other hosts; a dataset that is not a module target is refused (it cannot be built there). */
export function wireSpec(root: string, spec: WorkerSpec): WireSpec {
  const d = spec.dataset as { module?: unknown; export?: string; args?: readonly unknown[] };
  if (typeof d.module !== 'string')
    throw new mp.DatasetNeedsTargetError(
      "A DataLoader with `cluster` builds its dataset on each agent from a dataset target under cluster.root ({ module: 'data.js', export: 'makeDataset', args }): " +
        "datasets composed in this process (TensorDataset, Subset, ConcatDataset…) are handles to this host's memory. Wrap the composition in a module's export, or drop `cluster`.",
    );
  const t = (x: Here | null): WireTarget | null => (x === null ? null : wireTarget(root, { module: x.module, export: x.export }));
  return {
    ...spec,
    dataset: { ...wireTarget(root, { module: d.module, export: d.export ?? 'default' }), args: d.args ?? [] },
    collate: t(spec.collate),
    workerInit: t(spec.workerInit),
  };
}

/** A wire target under this agent's root (never outside it), as its workers import it. */
function here(root: string, w: WireTarget): Here {
  if (w.path !== null && !resolve(root, w.path).startsWith(root + sep))
    throw new mp.InvalidArgumentError(`The target ${w.path} is outside this agent's code root ${root}.`);
  return targetHere(root, w);
}

/** The spec as this agent's workers use it. */
export function specHere(root: string, w: WireSpec): WorkerSpec {
  return {
    ...w,
    dataset: { ...here(root, w.dataset), args: w.dataset.args },
    collate: w.collate === null ? null : here(root, w.collate),
    workerInit: w.workerInit === null ? null : here(root, w.workerInit),
  };
}
