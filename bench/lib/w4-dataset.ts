// W4's dataset (shared/YARDSTICK.md), the same as the torch anchor's Synthetic: sample i is
// a 3x224x224 float32 image written in full (empty, then fill with i % 255 / 255) and the
// label i % 10. `workMs` adds that much CPU work per sample (a spin, as the anchor's), for
// the goal measured with about 1 ms of work per sample.
import * as mp from 'tensorproc';

export function synthetic(n: number, workMs = 0): mp.MapDataset<[mp.Tensor, number]> {
  return {
    length: n,
    getItem(i: number): [mp.Tensor, number] {
      const x = mp.empty([3, 224, 224]);
      x.fill((i % 255) / 255);
      if (workMs > 0) {
        const end = performance.now() + workMs;
        while (performance.now() < end);
      }
      return [x, i % 10];
    },
  };
}
