// The placeholders that stand for registered objects in a serialized message: see NOTE
// [Host-object markers] (native/transport.cc). Marker k stands for table entry k of the
// message being written; the same objects serve every message, so a message costs no marker
// allocation, and one object met twice in a message is one marker met twice, which V8 writes
// as a back-reference and reads back as one object.
import { transportAddon } from './native.js';

const pool: object[] = [];
const indexOf = new Map<object, number>();

export function marker(k: number): object {
  while (pool.length <= k) {
    const m = new transportAddon.Marker();
    indexOf.set(m, pool.length);
    pool.push(m);
  }
  return pool[k]!;
}

/** The table index a marker stands for, or undefined for any other object. */
export function markerIndex(obj: object): number | undefined {
  return indexOf.get(obj);
}
