// A pool worker's batch of results not sent yet (NOTE [Pool protocol], messages.ts), and what
// it becomes when it cannot travel whole: split in two (too many descriptors for one
// message), or with each chunk whose results cannot travel turned into that chunk's failure.
// Worker side only.
import { checkMessage } from '../transport/index.js';
import { serializeError } from '../process/error-payload.js';
import { FAILED, OK } from './messages.js';

export interface Batch {
  first: number;
  status: number[] | null;
  errors: unknown[] | null;
  values: unknown[] | Int32Array | Float64Array;
  lengths: number[];
}

/** The batch in two halves (each chunk's values stay with it). */
export function split(b: Batch): [Batch, Batch] {
  const n = b.lengths.length >> 1;
  let v = 0;
  for (let k = 0; k < n; k++) v += b.lengths[k]!;
  const failedBefore = b.status === null ? 0 : b.status.slice(0, n).filter((s) => s === FAILED).length;
  const half = (from: number, to: number, vFrom: number, vTo: number, eFrom: number, eTo: number | undefined): Batch => ({
    first: (b.first + from) | 0,
    status: b.status?.slice(from, to) ?? null,
    errors: b.errors?.slice(eFrom, eTo) ?? null,
    values: b.values.slice(vFrom, vTo),
    lengths: b.lengths.slice(from, to),
  });
  return [half(0, n, 0, v, 0, failedBefore), half(n, b.lengths.length, v, b.values.length, failedBefore, undefined)];
}

/**
 * The batch with each chunk whose results cannot travel (a function, a released tensor…)
 * turned into that chunk's failure, as CPython reports a result it cannot pickle.
 */
export function refuseUnsendable(b: Batch): Batch {
  const status: number[] = [];
  const errors: unknown[] = [];
  const values: unknown[] = [];
  const lengths: number[] = [];
  let v = 0;
  let e = 0;
  for (let k = 0; k < b.lengths.length; k++) {
    const s = b.status?.[k] ?? OK;
    const len = b.lengths[k]!;
    const mine = b.values.slice(v, v + len);
    v += len;
    if (s === FAILED) errors.push(b.errors![e++]);
    let refused: unknown = null;
    if (s === OK) {
      try {
        checkMessage(mine, 'result');
      } catch (err) {
        refused = err;
      }
    }
    if (refused !== null) {
      status.push(FAILED);
      errors.push(serializeError(refused));
      lengths.push(0);
    } else {
      status.push(s);
      lengths.push(s === OK ? len : 0);
      if (s === OK) values.push(...mine);
    }
  }
  return { first: b.first, status, errors: errors.length ? errors : null, values, lengths };
}
