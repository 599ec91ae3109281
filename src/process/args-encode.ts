// Parent side of NOTE [Spawn arguments] (args.ts): the argument list as bytes and descriptors.
import { serialize } from 'node:v8';
import { encodeMessage, prepare } from '../transport/index.js';
import { FRAME, PLAIN, type EncodedArgs } from './args.js';
import { closeOnce, dupAll, systemError } from '../native/index.js';

/** Encodes `args` once for `copies` children (one in-flight reference per child and storage). */
export function encodeArgs(args: readonly unknown[], copies = 1): EncodedArgs {
  // The walk refuses what cannot travel, naming its path, and finds tensorproc objects.
  if (prepare(args, 'args').objects.length === 0) {
    const plain = serialize(args);
    const bytes = new Uint8Array(plain.length + 1);
    bytes[0] = PLAIN;
    bytes.set(plain, 1);
    return { bytes, fds: [], abandon: () => {}, release: () => {} };
  }
  const frame = encodeMessage(args, 'args', copies);
  const bytes = new Uint8Array(frame.bytes.length + 1);
  bytes[0] = FRAME;
  bytes.set(frame.bytes, 1);
  // Duplicates, not the frame's borrowed descriptors (NOTE [Spawn arguments]).
  let fds: number[];
  try {
    fds = dupAll(frame.fds);
  } catch (e) {
    frame.abandon();
    throw systemError(e, 'keeping the descriptors of spawn arguments');
  }
  return { bytes, fds, abandon: frame.abandon, release: closeOnce(fds) };
}
