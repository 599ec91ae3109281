// One W4 trial with tensorproc's DataLoader: a new loader (batches of 32 of W4's dataset,
// shuffled, persistent workers), two epochs timed, each batch released as the consumer's
// step ends (torch frees it when the loop variable is rebound), then closed. The dataset
// makes a fresh tensor per sample, so the loader is told that the samples are its own
// (`releaseSamples`: each is freed once collated, as torch frees it when collate drops the
// last reference, NOTE [Releasing samples]); `releaseSamples = false` measures the samples
// left to the garbage collector.
import * as mp from 'tensorproc';

export const W4 = { batchSize: 32, batches: 40 } as const;

export interface W4Trial {
  workers: number;
  workMs: number;
  /** Batches per second of epoch 1 (worker start-up included) and epoch 2 (persistent workers). */
  epochs: [number, number];
}

const dataset = (workMs: number) => ({
  module: new URL('./w4-dataset.js', import.meta.url),
  export: 'synthetic',
  args: [W4.batchSize * W4.batches, workMs],
});

export async function w4Trial(workers: number, workMs = 0, onBatch?: () => void, releaseSamples = true): Promise<W4Trial> {
  const loader = new mp.DataLoader<[mp.Tensor, mp.Tensor]>(dataset(workMs), {
    batchSize: W4.batchSize,
    shuffle: true,
    numWorkers: workers,
    persistentWorkers: workers > 0,
    releaseSamples,
  });
  const epochs: number[] = [];
  try {
    for (let epoch = 0; epoch < 2; epoch++) {
      const t0 = performance.now();
      let n = 0;
      for await (const b of loader) {
        using batch = b as [mp.Tensor, mp.Tensor] & Disposable;
        if (batch[0].shape[0] !== W4.batchSize || batch[0].shape[1] !== 3)
          throw new Error(`bad batch shape [${batch[0].shape.join(', ')}]`);
        n++;
        onBatch?.();
      }
      epochs.push(n / ((performance.now() - t0) / 1000));
    }
  } finally {
    await loader.close();
  }
  return { workers, workMs, epochs: epochs as [number, number] };
}
