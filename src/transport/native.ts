// The addon's transport primitives (native/transport.cc), typed here so that src/native keeps
// only what every layer needs.
import { addon } from '../native/index.js';

interface TransportAddon {
  /** A constructor of host objects for v8.Serializer: see NOTE [Host-object markers]. */
  Marker: new () => object;
  /** Readiness now, without waiting: 1 readable, 2 writable, 4 hang-up/error. */
  pollNow(fd: number, events: number): number;
  /**
   * An array's own enumerable keys: with `indices`, its element indices first as numbers
   * (ascending), then the other keys; without, only the keys that are not indices.
   */
  arrayKeys(a: unknown[], indices: boolean): (number | string)[];
}

export const transportAddon = addon as unknown as TransportAddon;
