// Batches are disposable: `for await (using batch of loader)` releases the batch's tensors at
// the end of each step, as torch frees a batch when its last reference goes (JS has no
// reference counts; without a release a batch's segments wait for the garbage collector
// before the workers can reuse them, NOTE [Collate into shared memory]).
import { Tensor } from '../tensor/index.js';

/** Releases every tensor in a value (arrays, Maps, plain objects walked); released ones are skipped. */
export function releaseTensors(value: unknown): void {
  const seen = new Set<object>();
  const walk = (v: unknown): void => {
    if (v === null || typeof v !== 'object' || seen.has(v)) return;
    seen.add(v);
    if (v instanceof Tensor) {
      if (!v.storage.isReleased()) v.release();
    } else if (Array.isArray(v)) {
      for (const x of v) walk(x);
    } else if (v instanceof Map) {
      for (const x of v.values()) walk(x);
    } else if (Object.getPrototypeOf(v) === Object.prototype || Object.getPrototypeOf(v) === null) {
      for (const k of Object.keys(v)) walk((v as Record<string, unknown>)[k]);
    }
  };
  walk(value);
}

/**
 * Gives an array or plain-object batch a Symbol.dispose that releases its tensors (a lone
 * tensor has one already). Not enumerable, and symbol keys do not travel: a batch put on a
 * queue arrives without it.
 */
export function disposable<B>(batch: B): B {
  if (
    batch !== null &&
    typeof batch === 'object' &&
    !(batch instanceof Tensor) &&
    !(Symbol.dispose in batch) &&
    Object.isExtensible(batch)
  ) {
    Object.defineProperty(batch, Symbol.dispose, { value: () => releaseTensors(batch), enumerable: false, configurable: true });
  }
  return batch;
}
