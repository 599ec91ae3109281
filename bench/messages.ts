// Message encoding bench: what one message costs to encode and decode, in one process, for
// the shapes messages usually have (a lone tensor, a tuple, a dict, plain numbers and
// strings), against V8's serializer (v8.serialize + v8.deserialize: what Node's
// child_process "advanced" serialization and the VALUE path use) and structuredClone. The
// tensor cases include what a receiver does with a descriptor (a dup here: the frame's
// descriptors are taken by the decoder). See NOTE [Frames] and NOTE [Plain frames].
//
//   node dist/bench/messages.js [trials=5]
import { serialize, deserialize } from 'node:v8';
import * as mp from '../src/index.js';
import { addon } from '../src/native/index.js';
import { encodeMessage, decodeMessage } from '../src/transport/index.js';
import { KIND_PLAIN, KIND_TENSOR, KIND_VALUE } from '../src/transport/wire.js';
import { fmtNum, markdownTable, median } from './lib/stats.js';

const trials = Number(process.argv[2] ?? 5);
const REPS = 20_000;

const t = mp.full([256], 1, { shared: true }); // 1 KiB
const row = t.view(16, 16);
const shapes: [string, (k: number) => unknown][] = [
  ['lone tensor', () => t],
  ['[tensor, label]', (k) => [t, k]],
  ['{ input, target, index }', (k) => ({ input: t, target: row.select(0, k % 16), index: k })],
  ['[k, 2k]', (k) => [k, 2 * k]],
  ['{ step, loss, tag }', (k) => ({ step: k, loss: k / 3, tag: 'train' })],
  ['{ when: Date } (VALUE)', (k) => ({ when: new Date(k) })],
];

const KINDS: Record<number, string> = { [KIND_TENSOR]: 'TENSOR', [KIND_PLAIN]: 'PLAIN', [KIND_VALUE]: 'VALUE' };

function tensorproc(make: (k: number) => unknown): number {
  const t0 = performance.now();
  for (let k = 0; k < REPS; k++) {
    const f = encodeMessage(make(k));
    const fds = Array.from(f.fds, (fd) => addon.dup(fd));
    decodeMessage(f.bytes, fds);
  }
  return ((performance.now() - t0) * 1000) / REPS;
}

/** V8's serializer on the same value with the tensors left out (it cannot carry them). */
function v8serializer(make: (k: number) => unknown): number {
  const t0 = performance.now();
  for (let k = 0; k < REPS; k++) deserialize(serialize(withoutTensors(make(k))));
  return ((performance.now() - t0) * 1000) / REPS;
}

function structured(make: (k: number) => unknown): number {
  const t0 = performance.now();
  for (let k = 0; k < REPS; k++) structuredClone(withoutTensors(make(k)));
  return ((performance.now() - t0) * 1000) / REPS;
}

function withoutTensors(v: unknown): unknown {
  if (v instanceof mp.Tensor) return null;
  if (Array.isArray(v)) return v.map(withoutTensors);
  if (v !== null && typeof v === 'object' && Object.getPrototypeOf(v) === Object.prototype) {
    return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, withoutTensors(x)]));
  }
  return v;
}

const results = new Map<string, number[]>();
const note = (key: string, us: number): void => {
  results.set(key, [...(results.get(key) ?? []), us]);
};
for (let trial = 0; trial < trials; trial++) {
  for (const [name, make] of shapes) {
    note(`${name}|tensorproc`, tensorproc(make));
    note(`${name}|v8`, v8serializer(make));
    note(`${name}|clone`, structured(make));
  }
}
const rows = shapes.map(([name, make]) => {
  const f = encodeMessage(make(0));
  const kind = KINDS[f.bytes[0]!] ?? '?';
  f.abandon();
  const tp = median(results.get(`${name}|tensorproc`)!);
  const v8 = median(results.get(`${name}|v8`)!);
  const clone = median(results.get(`${name}|clone`)!);
  for (const [k, us] of [
    ['tensorproc', tp],
    ['v8', v8],
    ['clone', clone],
  ] as const) {
    console.log(JSON.stringify({ bench: 'messages', shape: name, impl: k, us_per_message: +us.toFixed(3) }));
  }
  // With tensors the columns do different work (tensorproc carries them, the others a null).
  const comparable = withoutTensors(make(0)) !== null && JSON.stringify(withoutTensors(make(0))) === JSON.stringify(make(0));
  return [name, kind, fmtNum(tp, 2), fmtNum(v8, 2), fmtNum(clone, 2), comparable ? `${fmtNum(v8 / tp, 1)}x` : '–'];
});
console.log(
  `\nencode + decode in one process, µs per message (median of ${trials} trials of ${REPS}); tensors are left out of the V8 and structuredClone columns, which cannot carry them\n`,
);
console.log(markdownTable(['message', 'frame', 'tensorproc', 'v8.serialize + deserialize', 'structuredClone', 'v8 / tensorproc'], rows));
t.release();
