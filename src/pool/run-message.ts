// The RUN message of the parent side (NOTE [Pool protocol], messages.ts): the chunks a batch
// took, grouped by call, their items joined and packed (NOTE [Packed numbers]). Parent only:
// the worker reads RUN messages, it never builds them.
import type { Call, Taken } from './calls.js';
import { GROUP_FIELDS, MODE_ABORTABLE, RUN, packNumbers } from './messages.js';

/**
 * The items of consecutive chunks as one group's items: a lone chunk's as they are (an
 * array of PACK_MIN or more numbers packed), several typed ones joined by copying bytes,
 * anything else element by element.
 */
export function joinItems(parts: ArrayLike<unknown>[]): ArrayLike<unknown> {
  if (parts.length === 1) {
    const p = parts[0]!;
    return Array.isArray(p) ? packNumbers(p) : p;
  }
  let n = 0;
  let typed = true;
  let doubles = false;
  for (const p of parts) {
    n += p.length;
    if (p instanceof Float64Array) doubles = true;
    else if (!(p instanceof Int32Array)) typed = false;
  }
  if (typed) {
    const out = doubles ? new Float64Array(n) : new Int32Array(n);
    let at = 0;
    for (const p of parts) {
      out.set(p as Int32Array | Float64Array, at);
      at += p.length;
    }
    return out;
  }
  const out: unknown[] = [];
  for (const p of parts) for (let i = 0; i < p.length; i++) out.push(p[i]);
  return packNumbers(out);
}

/** The RUN message of chunks `taken`, the first numbered `firstSeq` (NOTE [Pool protocol]). */
export function runMessage(firstSeq: number, taken: readonly Taken[]): unknown[] {
  const msg: unknown[] = [RUN, firstSeq];
  let parts: ArrayLike<unknown>[] = [];
  let groupCall: Call | null = null;
  let full = false;
  let at = 0;
  for (const t of taken) {
    const c = t.call;
    // A chunk continues the group of the chunk before it if it is of the same call, and
    // that one was full (only a group's last chunk may be short).
    if (groupCall !== c || !full) {
      at = msg.length;
      parts = [];
      groupCall = c;
      msg.push(c.target, c.slot, c.gen, c.mode | (c.abortable ? MODE_ABORTABLE : 0), c.chunkLen, 0, parts);
    }
    parts.push(t.items);
    full = t.items.length === c.chunkLen;
    msg[at + 5] = (msg[at + 5] as number) + 1;
  }
  // NOTE [Packed numbers]: a long group of numbers travels as one typed array.
  for (let g = 2 + GROUP_FIELDS - 1; g < msg.length; g += GROUP_FIELDS) msg[g] = joinItems(msg[g] as ArrayLike<unknown>[]);
  return msg;
}
