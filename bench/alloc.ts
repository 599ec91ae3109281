// Allocation bench (issue 2): allocate + fill + release a float32 tensor that can travel,
// 1 KiB to 64 MiB, against plain Node and against a fresh segment per tensor (what PyTorch
// does on every send: shm_open/memfd, fallocate, mmap, a page fault per page).
// Trials are data, drivers run each; trials interleave so machine noise hits all alike.
//
//   node dist/bench/alloc.js [trials=5]
import * as mp from '../src/index.js';
import { Segment, HEADER_BYTES } from '../src/sharing/index.js';
import { fmtBytes, fmtNum, markdownTable, median } from './lib/stats.js';

const trials = Number(process.argv[2] ?? 5);
const SIZES = [1 << 10, 64 << 10, 1 << 20, 16 << 20, 64 << 20];
// Enough repetitions for ~50-100 ms per measurement at every size.
const repsFor = (size: number) => Math.max(10, Math.min(100_000, Math.floor(2 ** 30 / size / 4)));

type Driver = (size: number, reps: number) => void;

const drivers: Record<string, Driver> = {
  // The floor: writing the bytes of a buffer that already exists, is mapped and is hot.
  'plain buffer, reused': (size, reps) => {
    const a = new Float32Array(size / 4);
    for (let i = 0; i < reps; i++) a.fill(i);
  },
  'new Float32Array': (size, reps) => {
    for (let i = 0; i < reps; i++) new Float32Array(size / 4).fill(i);
  },
  'tensorproc shared, recycled': (size, reps) => {
    for (let i = 0; i < reps; i++) {
      const t = mp.empty([size / 4], { shared: true });
      t.fill(i);
      t.release();
    }
  },
  'tensorproc shared, .data.fill': (size, reps) => {
    for (let i = 0; i < reps; i++) {
      const t = mp.empty([size / 4], { shared: true });
      (t.data as Float32Array).fill(i);
      t.release();
    }
  },
  'fresh segment per tensor': (size, reps) => {
    for (let i = 0; i < reps; i++) {
      const seg = Segment.create('file_descriptor', size);
      new Float32Array(seg.lease(size)).fill(i);
      seg.drop();
    }
  },
};

const results = new Map<string, number[]>(); // `${driver}@${size}` -> µs per tensor
for (let t = 0; t < trials; t++) {
  for (const size of SIZES) {
    for (const [name, run] of Object.entries(drivers)) {
      const reps = name === 'fresh segment per tensor' ? Math.max(5, repsFor(size) >> 3) : repsFor(size);
      run(size, Math.max(2, reps >> 4)); // warm
      const t0 = performance.now();
      run(size, reps);
      const us = ((performance.now() - t0) * 1e3) / reps;
      const key = `${name}@${size}`;
      results.set(key, [...(results.get(key) ?? []), us]);
      console.log(JSON.stringify({ bench: 'alloc', impl: name, bytes: size, trial: t, us_per_tensor: +us.toFixed(3) }));
    }
  }
}

const names = Object.keys(drivers);
const rows = SIZES.map((size) => {
  const base = median(results.get(`plain buffer, reused@${size}`)!);
  return [
    fmtBytes(size),
    ...names.map((n) => {
      const m = median(results.get(`${n}@${size}`)!);
      return n === 'plain buffer, reused' ? `${fmtNum(m, 2)} µs` : `${fmtNum(m, 2)} µs (${fmtNum(m / base, 2)}x)`;
    }),
  ];
});
console.log(
  `\nallocate + fill + release, median of ${trials} trials, µs per tensor (ratio to the reused plain buffer); header ${HEADER_BYTES} B\n`,
);
console.log(markdownTable(['size', ...names], rows));
mp.emptyCache();
