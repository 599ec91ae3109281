// DataLoader({ pinMemory: true }): each batch's CPU tensors page-locked in place, in the
// loading process (workers never touch CUDA), as torch's pin-memory thread does but without
// its copy of every batch: a batch's segments are registered the first time they are seen
// and stay so while mapped (NOTE [Pinned segments], src/cuda/ops.ts), so a recycled batch
// segment costs nothing the next time. Without CUDA it warns once and hands batches over as
// they are (torch warns and turns pinning off when no accelerator is present).
import { Tensor } from '../tensor/index.js';
import { cuda } from '../cuda/index.js';

let warned = false;

/** Pins every CPU tensor reachable in `batch` (arrays and plain objects); returns the batch. */
export function pinBatch<B>(batch: B): B {
  if (!cuda.isAvailable()) {
    if (!warned) {
      warned = true;
      process.emitWarning(`DataLoader pinMemory is on, but CUDA is unavailable (${cuda.unavailableReason()}): batches are not pinned.`, {
        code: 'TP_PIN_MEMORY_OFF',
      });
    }
    return batch;
  }
  visit(batch, 0);
  return batch;
}

function visit(v: unknown, depth: number): void {
  if (depth > 32 || v === null || typeof v !== 'object') return;
  if (v instanceof Tensor) {
    if (v.device === 'cpu' && !v.storage.isReleased() && v.numel() > 0) v.pinMemory();
    return;
  }
  if (Array.isArray(v)) for (const x of v) visit(x, depth + 1);
  else if (Object.getPrototypeOf(v) === Object.prototype) for (const x of Object.values(v)) visit(x, depth + 1);
}
