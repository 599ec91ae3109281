// The model step: heatmaps from an image, over several scales and with the flip test, as the
// seed's get_multi_stage_outputs and aggregate_results make them.
//
// NOTE [Colour-keyed joints]
// No trained network ships with this example, so the "network" is one with fixed weights
// that does the same kind of work: each joint is drawn in a colour of its own, and joint
// j's heatmap is a colour match (exp(-d²/2τ²) against its colour, per pixel), a Gaussian
// stride-4 average pooling, and a Gaussian matched filter of the blob's size (a separable
// convolution). A colour keeps its joint's identity under a horizontal flip, so the flip test
// flips the heatmaps back without swapping left/right pairs (a learned pose network, which
// recognises a left shoulder by its context, must swap them).
import { STRIDE, type Config } from './config.js';

/** The seed's Normalize(mean, std) constants (ImageNet). */
export const MEAN = [0.485, 0.456, 0.406] as const;
export const STD = [0.229, 0.224, 0.225] as const;

export const PALETTE: readonly (readonly [number, number, number])[] = [
  [1, 0, 0],
  [0, 1, 0],
  [0, 0, 1],
  [1, 1, 0],
  [1, 0, 1],
  [0, 1, 1],
  [1, 1, 1],
  [1, 0.55, 0],
];

/** The blobs' radius (σ) in input pixels. */
export function blobSigma(inputSize: number): number {
  return inputSize / 48;
}

/** Bilinear resize of C planes of h×w to h2×w2 (align_corners=false, as torch's interpolate). */
export function resize(src: Float32Array, c: number, h: number, w: number, h2: number, w2: number): Float32Array {
  if (h === h2 && w === w2) return src;
  const out = new Float32Array(c * h2 * w2);
  const sy = h / h2,
    sx = w / w2;
  for (let y = 0; y < h2; y++) {
    const fy = Math.min(Math.max((y + 0.5) * sy - 0.5, 0), h - 1);
    const y0 = Math.floor(fy),
      y1 = Math.min(y0 + 1, h - 1),
      ay = fy - y0;
    for (let x = 0; x < w2; x++) {
      const fx = Math.min(Math.max((x + 0.5) * sx - 0.5, 0), w - 1);
      const x0 = Math.floor(fx),
        x1 = Math.min(x0 + 1, w - 1),
        ax = fx - x0;
      for (let k = 0; k < c; k++) {
        const p = k * h * w;
        const top = src[p + y0 * w + x0]! * (1 - ax) + src[p + y0 * w + x1]! * ax;
        const bottom = src[p + y1 * w + x0]! * (1 - ax) + src[p + y1 * w + x1]! * ax;
        out[k * h2 * w2 + y * w2 + x] = top * (1 - ay) + bottom * ay;
      }
    }
  }
  return out;
}

/** Mirrors C planes of h×w left to right. */
export function flip(src: Float32Array, c: number, h: number, w: number): Float32Array {
  const out = new Float32Array(src.length);
  for (let k = 0; k < c * h; k++) {
    const row = k * w;
    for (let x = 0; x < w; x++) out[row + x] = src[row + w - 1 - x]!;
  }
  return out;
}

function gaussianKernel(sigma: number): Float32Array {
  const r = Math.max(1, Math.ceil(2.5 * sigma));
  const k = new Float32Array(2 * r + 1);
  let sum = 0;
  for (let i = -r; i <= r; i++) sum += k[i + r] = Math.exp(-(i * i) / (2 * sigma * sigma));
  for (let i = 0; i < k.length; i++) k[i]! /= sum;
  return k;
}

/** Separable convolution of one h×w plane with `kernel`, zero beyond the edges. */
function blur(plane: Float32Array, h: number, w: number, kernel: Float32Array): Float32Array {
  const r = (kernel.length - 1) >> 1;
  const tmp = new Float32Array(h * w);
  const out = new Float32Array(h * w);
  for (let y = 0; y < h; y++) {
    for (let x = 0; x < w; x++) {
      let s = 0;
      for (let i = -r; i <= r; i++) {
        const xx = x + i;
        if (xx >= 0 && xx < w) s += plane[y * w + xx]! * kernel[i + r]!;
      }
      tmp[y * w + x] = s;
    }
  }
  for (let y = 0; y < h; y++) {
    for (let x = 0; x < w; x++) {
      let s = 0;
      for (let i = -r; i <= r; i++) {
        const yy = y + i;
        if (yy >= 0 && yy < h) s += tmp[yy * w + x]! * kernel[i + r]!;
      }
      out[y * w + x] = s;
    }
  }
  return out;
}

/** The network of NOTE [Colour-keyed joints]: K heatmaps of (h/4)×(w/4) from a normalised [3,h,w] image. */
export function forward(img: Float32Array, h: number, w: number, cfg: Config, scale: number): Float32Array {
  const joints = cfg.MODEL.NUM_JOINTS;
  const tau2 = 2 * cfg.MODEL.COLOR_TAU ** 2;
  const plane = h * w;
  // The matched filter runs after pooling, at the output's resolution: a blob of σ input
  // pixels is one of σ/STRIDE there, and the convolution costs STRIDE² times less.
  const kernel = gaussianKernel((blobSigma(cfg.DATASET.INPUT_SIZE) * scale) / STRIDE);
  const oh = h / STRIDE,
    ow = w / STRIDE;
  const pooled = new Float32Array(joints * oh * ow);
  const opl = oh * ow;
  const norm = 1 / (STRIDE * STRIDE);
  for (let y = 0; y < h; y++) {
    const prow = ((y / STRIDE) | 0) * ow;
    for (let x = 0; x < w; x++) {
      const p = y * w + x;
      const r = img[p]! * STD[0] + MEAN[0];
      const g = img[plane + p]! * STD[1] + MEAN[1];
      const b = img[2 * plane + p]! * STD[2] + MEAN[2];
      const q = prow + ((x / STRIDE) | 0);
      for (let j = 0; j < joints; j++) {
        const colour = PALETTE[j]!;
        const d2 = (r - colour[0]) ** 2 + (g - colour[1]) ** 2 + (b - colour[2]) ** 2;
        pooled[j * opl + q]! += Math.exp(-d2 / tau2) * norm;
      }
    }
  }
  const out = new Float32Array(joints * opl);
  for (let j = 0; j < joints; j++) out.set(blur(pooled.subarray(j * opl, (j + 1) * opl), oh, ow, kernel), j * opl);
  return out;
}

/**
 * The heatmaps of one image at the base output size: for each scale (largest first, as the
 * seed sorts them), the image resized, the network run (and on the mirrored image, its
 * heatmaps mirrored back and averaged in, with the flip test), resized to the base size;
 * then the mean over scales.
 */
export function multiScaleHeatmaps(img: Float32Array, cfg: Config): Float32Array {
  const size = cfg.DATASET.INPUT_SIZE;
  const joints = cfg.MODEL.NUM_JOINTS;
  const base = size / STRIDE;
  const final = new Float32Array(joints * base * base);
  const scales = [...cfg.TEST.SCALE_FACTOR].sort((a, b) => b - a);
  for (const s of scales) {
    const side = Math.max(2, Math.round((size * s) / STRIDE)) * STRIDE;
    const resized = resize(img, 3, size, size, side, side);
    let heat = forward(resized, side, side, cfg, side / size);
    const out = side / STRIDE;
    if (cfg.TEST.FLIP_TEST) {
      const mirrored = flip(forward(flip(resized, 3, side, side), side, side, cfg, side / size), joints, out, out);
      for (let k = 0; k < heat.length; k++) heat[k] = (heat[k]! + mirrored[k]!) / 2;
    }
    heat = resize(heat, joints, out, out, base, base);
    for (let k = 0; k < final.length; k++) final[k]! += heat[k]! / scales.length;
  }
  return final;
}
