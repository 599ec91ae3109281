// Running out of descriptors while starting a child, found before the start instead of
// after it. child_process reports EMFILE only later, as an 'error' event of a child with
// no pid (libuv needs a pipe, two descriptors, to start a process), and a Worker as an
// 'error' event (ERR_WORKER_INIT_FAILED) of a thread that then "exits" with code 0 (its
// event loop needs four). So that many are opened and closed again first, and running out
// is a TooManyFilesError thrown by the start itself, with nothing left running.
import { addon, systemError } from '../native/index.js';

/** Throws TooManyFilesError unless `pairs` socket pairs (2 descriptors each) could be opened now. */
export function checkDescriptors(pairs: number, what: string): void {
  const open: number[] = [];
  try {
    for (let i = 0; i < pairs; i++) open.push(...addon.socketpair());
  } catch (e) {
    throw systemError(e, what);
  } finally {
    for (const fd of open) addon.close(fd);
  }
}

/** The socket pair of a process child's control channel, and room to start the process. */
export function channelPair(what: string): [number, number] {
  let pair: [number, number];
  try {
    pair = addon.socketpair();
  } catch (e) {
    throw systemError(e, what);
  }
  try {
    checkDescriptors(1, what);
  } catch (e) {
    addon.close(pair[0]);
    addon.close(pair[1]);
    throw e;
  }
  return pair;
}

/** A Worker's start failure as a coded error: out of descriptors is a TooManyFilesError, as for a process. */
export function workerStartError(e: unknown, what: string): Error {
  const text = String((e as Error)?.message ?? e);
  const code = /ENFILE/.test(text) ? 'ENFILE' : /EMFILE/.test(text) ? 'EMFILE' : null;
  return code ? systemError({ code, syscall: 'new Worker', message: text }, what) : (e as Error);
}
