// The evaluation's dataset, made on the fly: image i shows one figure whose joints are
// coloured blobs at known places, over a smooth background with noise. A dataset target:
// the main process and every loader worker build it by calling makeKeypointDataset(cfg), and
// every worker renders the images it is asked for (the work a real loader spends decoding
// and augmenting). Image i is the same wherever it is rendered: its generator is seeded with
// (DATASET.SEED, i), not with the worker's seed.
import * as mp from 'tensorproc';
import type { Config } from './config.js';
import { PALETTE, MEAN, STD, blobSigma } from './model.js';

/** The figure's joints, in units of its scale, around its centre: head, shoulders, hips, knees, a hand. */
const TEMPLATE: readonly [number, number][] = [
  [0, -0.55],
  [-0.3, -0.25],
  [0.3, -0.25],
  [-0.2, 0.2],
  [0.2, 0.2],
  [-0.22, 0.6],
  [0.22, 0.6],
  [0.55, -0.05],
];

export interface Sample {
  /** [3, S, S] float32, normalised with the ImageNet mean and std (the seed's transforms). */
  image: mp.Tensor;
  /** [K, 3] float32: x, y in input pixels, visibility 1 or 0. */
  keypoints: mp.Tensor;
  /** The figure's area in pixels² (COCO's object scale for OKS). */
  area: number;
  index: number;
}

export function makeKeypointDataset(cfg: Config): mp.MapDataset<Sample> {
  const { NUM_IMAGES: n, INPUT_SIZE: size, SEED: seed, NOISE: noise, DISTRACTORS: distractors } = cfg.DATASET;
  const joints = cfg.MODEL.NUM_JOINTS;
  const sigma = blobSigma(size);
  return {
    length: n,
    getItem(index: number): Sample {
      const g = new mp.Generator((seed * 1_000_003 + index) % 2 ** 52);
      const scale = size * (0.35 + 0.2 * g.random());
      const cx = size * (0.35 + 0.3 * g.random());
      const cy = size * (0.35 + 0.3 * g.random());
      const angle = (g.random() - 0.5) * 0.8;
      const [cos, sin] = [Math.cos(angle), Math.sin(angle)];
      const kp = new Float32Array(joints * 3);
      for (let j = 0; j < joints; j++) {
        const [tx, ty] = TEMPLATE[j]!;
        const jx = tx + (g.random() - 0.5) * 0.08;
        const jy = ty + (g.random() - 0.5) * 0.08;
        const x = cx + scale * (cos * jx - sin * jy);
        const y = cy + scale * (sin * jx + cos * jy);
        kp[3 * j] = x;
        kp[3 * j + 1] = y;
        kp[3 * j + 2] = x >= 0 && x <= size - 1 && y >= 0 && y <= size - 1 ? 1 : 0;
      }
      return {
        image: render(g, size, kp, joints, sigma, noise, distractors),
        keypoints: mp.tensor(kp, { shape: [joints, 3] }),
        area: scale * scale,
        index,
      };
    },
  };
}

/** Background gradient, coloured blobs composited over it, Gaussian noise, then normalised. */
function render(
  g: mp.Generator,
  size: number,
  kp: Float32Array,
  joints: number,
  sigma: number,
  noise: number,
  distractors: number,
): mp.Tensor {
  const plane = size * size;
  const img = new Float32Array(3 * plane);
  for (let c = 0; c < 3; c++) {
    const base = 0.25 + 0.25 * g.random();
    const gx = ((g.random() - 0.5) * 0.3) / size;
    const gy = ((g.random() - 0.5) * 0.3) / size;
    for (let y = 0; y < size; y++) {
      const row = c * plane + y * size;
      for (let x = 0; x < size; x++) img[row + x] = base + gx * x + gy * y;
    }
  }
  // Clutter first, then the figure over it: blobs in colours near the joints' (a jittered
  // palette colour), anywhere, which the model may take for a joint.
  for (let d = 0; d < distractors; d++) {
    const near = PALETTE[g.randint(joints)]!;
    const colour = near.map((v) => Math.min(1, Math.max(0, v + (g.random() - 0.5) * 0.9)));
    blob(img, size, g.random() * size, g.random() * size, sigma * (0.7 + g.random()), colour);
  }
  for (let j = 0; j < joints; j++) blob(img, size, kp[3 * j]!, kp[3 * j + 1]!, sigma, PALETTE[j]!);
  // Noise by Box-Muller, two normals a draw; then the seed's Normalize(mean, std).
  for (let k = 0; k < img.length; k += 2) {
    const r = noise * Math.sqrt(-2 * Math.log(1 - g.random()));
    const t = 2 * Math.PI * g.random();
    img[k] = img[k]! + r * Math.cos(t);
    if (k + 1 < img.length) img[k + 1] = img[k + 1]! + r * Math.sin(t);
  }
  for (let c = 0; c < 3; c++) {
    for (let k = c * plane; k < (c + 1) * plane; k++) img[k] = (img[k]! - MEAN[c]!) / STD[c]!;
  }
  return mp.tensor(img, { shape: [3, size, size] });
}

/** Composites a Gaussian blob of `colour` at (px, py) over the image. */
function blob(img: Float32Array, size: number, px: number, py: number, sigma: number, colour: readonly number[]): void {
  const plane = size * size;
  const reach = Math.ceil(3 * sigma);
  for (let y = Math.max(0, Math.floor(py - reach)); y <= Math.min(size - 1, Math.ceil(py + reach)); y++) {
    for (let x = Math.max(0, Math.floor(px - reach)); x <= Math.min(size - 1, Math.ceil(px + reach)); x++) {
      const a = Math.exp(-((x - px) ** 2 + (y - py) ** 2) / (2 * sigma * sigma));
      for (let c = 0; c < 3; c++) {
        const k = c * plane + y * size + x;
        img[k] = img[k]! * (1 - a) + colour[c]! * a;
      }
    }
  }
}
