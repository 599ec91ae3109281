// The addon's transport primitives (native/transport.cc), typed here so that src/native keeps
// only what every layer needs.
import { addon } from '../native/index.js';

interface TransportAddon {
  /** A constructor of host objects for v8.Serializer: see NOTE [Host-object markers]. */
  Marker: new () => object;
  /** Readiness now, without waiting: 1 readable, 2 writable, 4 hang-up/error. */
  pollNow(fd: number, events: number): number;
  /** Own enumerable string keys that are not array indices (an array's extra properties). */
  namedKeys(obj: object): string[];
  /** An array's own enumerable keys: its element indices first, as numbers, ascending; then the others, as strings. */
  ownIndices(a: unknown[]): (number | string)[];
}

export const transportAddon = addon as unknown as TransportAddon;
