// torch.utils.data.TensorDataset: item i is the i-th row of each tensor (a view, not a copy).
import { DatasetSizeMismatchError, InvalidArgumentError } from '../../errors.js';
import { Tensor } from '../../tensor/index.js';
import type { MapDataset } from '../dataset.js';
import { ComposedDataset, itemIndex, type Part } from './composed.js';

export class TensorDataset extends ComposedDataset implements MapDataset<Tensor[]> {
  readonly tensors: readonly Tensor[];
  readonly parts: readonly Part[] = [];
  readonly kind = 'map';

  /** Tensors of the same first dimension; shared ones travel to a loader's workers as handles, others are moved into shared memory when they first do. */
  constructor(...tensors: Tensor[]) {
    super();
    if (tensors.length === 0) throw new InvalidArgumentError('TensorDataset needs at least one tensor: new mp.TensorDataset(x, y).');
    tensors.forEach((t, k) => {
      if (!(t instanceof Tensor)) throw new InvalidArgumentError(`TensorDataset takes tensors: argument ${k} is ${String(t)}.`);
      if (t.ndim === 0)
        throw new InvalidArgumentError(`TensorDataset: tensor ${k} is 0-d; each tensor needs a first dimension (its rows are the items).`);
    });
    const n = tensors[0]!.shape[0]!;
    const bad = tensors.findIndex((t) => t.shape[0] !== n);
    if (bad >= 0) {
      throw new DatasetSizeMismatchError(
        `Size mismatch between tensors: tensor 0 has ${n} rows, tensor ${bad} has ${tensors[bad]!.shape[0]} (shapes ${tensors
          .map((t) => `[${t.shape.join(', ')}]`)
          .join(', ')}). Every tensor of a TensorDataset needs the same first dimension.`,
      );
    }
    this.tensors = tensors;
  }

  get length(): number {
    return this.tensors[0]!.shape[0]!;
  }

  /** The i-th row of each tensor (negative i counts from the end, as in torch). */
  getItem(index: number): Tensor[] {
    const i = itemIndex(index, this.length, 'TensorDataset');
    return this.tensors.map((t) => t.select(0, i));
  }

  protected partName(k: number): string {
    return `tensors[${k}]`;
  }
}
