// The dataset target of score-images.ts: synthetic 3×64×64 "images" (a gradient whose slope is
// the label), made in each DataLoader worker as a real program would decode them from files.
import * as mp from 'tensorproc';

export const SIZE = 64;

export function makeImages(n: number) {
  return {
    length: n,
    getItem(i: number) {
      const label = i % 4;
      const x = mp.empty([3, SIZE, SIZE], { dtype: 'float32' });
      const d = x.data as Float32Array;
      for (let k = 0; k < d.length; k++) d[k] = ((k % SIZE) * (label + 1)) / (SIZE * 4);
      return { x, y: label };
    },
  };
}
