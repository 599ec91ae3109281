// The receive side of an Endpoint at the socket: one recvmsg per message, with what that
// call may meet: the receive reserve for the descriptors a message may carry (NOTE [Receive
// reserve], descriptors.ts), a full descriptor table, a peer's reset, datagrams that no
// tensorproc process sends. Each is a coded error that says whether anything was taken. The
// waiting (gets, polls, timeouts) is the Endpoint's (endpoint.ts).
import { addon, EAGAIN, EMSGSIZE, FDS_DROPPED, RECV_DROPS_SEEN, RECV_EMPTY, systemError } from '../native/index.js';
import { FrameDecodeError, TooManyFilesError } from '../errors.js';
import { decodeReceived, MAX_FDS, MAX_FRAME } from './frame.js';
import {
  giveReserve,
  hasMappingRoom,
  mappingsError,
  renewReserve,
  shedDescriptors,
  takeReserve,
  witnessesRetired,
} from '../sharing/index.js';

/** read() found nothing waiting. */
export const READ_NOTHING = EAGAIN;
/** read() found the end of the stream: every sending end was closed. */
export const READ_END = -1;

/** Datagrams in a row without descriptors after which a reader stops probing (NOTE [Receive reserve]). */
const PROBE_AFTER = 1024;

// One receive buffer per thread: a message is decoded before the next one is read.
const recvBuffer = new Uint8Array(MAX_FRAME);
const fdsOut = new Int32Array(MAX_FDS + 1);

export class DatagramReader {
  readonly #fd: number;
  /** What the endpoint is called in errors: 'queue' or 'pipe end'. */
  readonly #what: string;
  readonly #onDatagram: (() => void) | undefined;
  /**
   * Datagrams received in a row that needed no descriptor slot (NOTE [Receive reserve]):
   * those without descriptors, and those whose only descriptors were witnesses (NOTE
   * [Witness bin]), which a message can do without.
   */
  #fdLess = 0;
  /** The datagram read() took had its descriptors dropped by the kernel (a full table). */
  #dropped = false;

  /** `onDatagram` is called each time a datagram is taken off the socket, before it is decoded. */
  constructor(fd: number, what: string, onDatagram?: () => void) {
    this.#fd = fd;
    this.#what = what;
    this.#onDatagram = onDatagram;
  }

  /**
   * Takes one datagram into the thread's buffer: its length, READ_NOTHING or READ_END.
   * Throws a coded error, and then says in it whether the datagram was taken.
   */
  read(): number {
    // NOTE [Mapping budget]: refused before anything is taken, the message waits for a later receive.
    if (!hasMappingRoom()) throw mappingsError(`Receiving on a ${this.#what} (nothing was taken)`);
    let n: number;
    try {
      n = this.#recv();
    } catch (e) {
      // Out of descriptors before anything was taken: what tensorproc keeps for reuse only
      // goes first (NOTE [Kept descriptors]), then one more try.
      if (!isProbeFailure(e) || shedDescriptors() === 0) throw this.#error(e);
      try {
        n = this.#recv();
      } catch (e2) {
        throw this.#error(e2);
      }
    }
    if (n === EAGAIN) return READ_NOTHING;
    if (n === RECV_EMPTY) {
      // No tensorproc process sends one, so it took no slot: some other process writes to
      // this socket. Dropped; the queue goes on (only the end of the stream ends it).
      throw new FrameDecodeError(`A zero-length datagram arrived on this ${this.#what} (it was dropped): it was not sent by tensorproc.`);
    }
    if (n < 0) return READ_END;
    this.#onDatagram?.();
    return n;
  }

  /** The message of the datagram read() took, `n` bytes long (before the next read). */
  decode(n: number): unknown {
    const fds = fdsOut[0]!;
    if (this.#dropped) return this.#decodeDropped(n);
    if (fds === 0) return decodeReceived(recvBuffer.subarray(0, n), fdsOut);
    const run = this.#fdLess;
    this.#fdLess = 0; // descriptors arrive here: a slot is made sure of again, unless...
    const before = witnessesRetired();
    const value = decodeReceived(recvBuffer.subarray(0, n), fdsOut);
    // ...they were witnesses only, which a message can do without (NOTE [Witness bin]).
    if (witnessesRetired() - before === fds) {
      this.#fdLess = run;
      this.#noSlotNeeded();
    }
    return value;
  }

  /**
   * A datagram whose descriptors the kernel dropped (RECV_DROPS_SEEN at a full table):
   * delivered if it needed none but witnesses (file_system storages only), else it is lost,
   * and said so. The endpoint makes sure of a slot again from now on.
   */
  #decodeDropped(n: number): unknown {
    this.#dropped = false;
    this.#fdLess = 0;
    try {
      return decodeReceived(recvBuffer.subarray(0, n), fdsOut);
    } catch (e) {
      // Without its descriptors the message could not be rebuilt (the decoder's error says
      // which part): it is lost for want of slots, which is what the user must act on.
      throw this.#error(Object.assign(new Error('recvmsg: descriptors dropped', { cause: e }), { code: 'EMFILE', syscall: 'recvmsg' }));
    }
  }

  #noSlotNeeded(): void {
    if (++this.#fdLess === PROBE_AFTER) renewReserve();
  }

  #error(e: unknown): Error {
    const err = e as { errno?: number; code?: string; syscall?: string };
    if (err.errno === EMSGSIZE) {
      // Larger than any frame tensorproc sends (NOTE [Frames]): it took no slot either.
      return new FrameDecodeError(`A message larger than ${MAX_FRAME} bytes arrived (it was dropped): it was not sent by tensorproc.`);
    }
    if (err.code === 'EMFILE' || err.code === 'ENFILE') {
      // NOTE [Receiving descriptors] (channel.cc): the probe failed before anything was taken,
      // or (a message with more descriptors than slots were free) the kernel dropped them.
      const taken = err.syscall === 'recvmsg';
      if (taken) {
        this.#onDatagram?.();
        this.#fdLess = 0; // descriptors arrive here after all: probe again
      }
      return new TooManyFilesError(
        `Receiving on a ${this.#what}: the open-file limit is reached (${err.code}), so a message that carries descriptors cannot be received. ` +
          (taken
            ? 'A message with more descriptors than this process had room for arrived, and was lost. '
            : 'Nothing was taken: the message waits for a later receive. ') +
          "Close descriptors (files, sockets, tensors you hold), raise the limit (ulimit -n), or use setSharingStrategy('file_system'), whose receivers keep none (its messages carry one at most, closed once received).",
        err,
      );
    }
    return systemError(e, `receiving on a ${this.#what}`);
  }

  /**
   * One recvmsg. A peer that closed its end with messages of ours unread leaves ECONNRESET
   * pending on this end, reported once, by the next call, ahead of messages still waiting
   * here: that report is taken, and the call made again (it then returns a message, or the
   * end of the stream).
   */
  #recv(): number {
    try {
      // NOTE [Receive reserve]: a slot is made sure of while datagrams here carry descriptors.
      const reserve = this.#fdLess < PROBE_AFTER ? takeReserve() : RECV_DROPS_SEEN;
      const n = addon.recv(this.#fd, recvBuffer, fdsOut, reserve);
      if (n === EAGAIN) {
        if (reserve >= 0) giveReserve(fdsOut[0]!);
      } else if (n >= 0) {
        if (fdsOut[0] === FDS_DROPPED) {
          fdsOut[0] = 0;
          this.#dropped = true;
        } else if (fdsOut[0] === 0) this.#noSlotNeeded();
        // with descriptors: decode() says whether they were witnesses only
      }
      return n;
    } catch (e) {
      if ((e as { code?: string }).code !== 'ECONNRESET') throw e;
      return addon.recv(this.#fd, recvBuffer, fdsOut);
    }
  }
}

/** recv's slot probe found the descriptor table full: nothing was taken (NOTE [Receiving descriptors]). */
function isProbeFailure(e: unknown): boolean {
  const err = e as { code?: string; syscall?: string };
  return (err.code === 'EMFILE' || err.code === 'ENFILE') && err.syscall !== 'recvmsg';
}
