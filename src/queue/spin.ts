// A get that finds its queue empty watches it for a while before it sleeps.
//
// NOTE [Spinning before sleeping]
// A get that finds nothing waits in the event loop (epoll) for the socket to turn readable.
// When the next message is tens of µs away, that sleep costs more than it saves: the CPU goes
// idle, and the producer's send then pays for waking it (an inter-processor interrupt, which
// on a VM goes through the hypervisor: 20-45 µs inside the producer's sendmsg on the project's
// 2-vCPU VMs, a quarter of what a 1 MiB message costs it), and the consumer runs tens of µs
// after that again. So a get that finds the queue empty first watches the queue's SENT word,
// which every put bumps once its datagram is in the socket, for at most SPIN_US
// (TENSORPROC_SPIN_US, default 200 µs), with the CPU's pause hint between loads and no system
// call (the addon's spinWhile), and receives at once when it moves: the rent-or-buy rule of
// NOTE [Waiting for a segment], spinning about as long as a sleep and a wake-up cost. SENT, not
// COUNT: a put takes its slot (COUNT + 1) before its sendmsg, so a get watching COUNT ran its
// recv before the datagram was there, found nothing and slept after all (W1 at 1 KiB lost 10%).
// The spin holds this thread's event loop for SPIN_US at most. Spins that come to nothing back
// off: after n of them in a row, the next 2^n - 1 gets of this queue in this thread do not spin
// (n at most MAX_BACKOFF; arm() counts every get, since SENT must be read before the queue is
// looked at), so a consumer whose producer is slow (16 MiB tensors a millisecond apart) spins
// in about one get of 256, and a spin that pays resets it. A process
// allowed on one CPU never spins: its spin would hold the CPU its producer needs.
// A put that finds a bounded queue full spins too, on COUNT, before it counts itself in
// WAITERS (PutSpin): a fast producer's slot is usually one get away, and a producer asleep
// on the notice socket costs the consumer a notice per get (a send that wakes the producer:
// 11 µs of a Python consumer's 27 µs per 1 KiB message in W6, 88% of its gets) and the
// producer a wake-up. While it spins it is no waiter, so gets send nothing; when COUNT moves
// it takes the slot as any put does (another process may win it: then it waits, as before).
// Same bound, same back-off, per queue and side; the spin counts against the put's timeout.
// SimpleQueue has no shared words (torch's has no state either) and does not spin.
import { availableParallelism } from 'node:os';
import { addon, type NativeMapping } from '../native/index.js';
import { ENV, envNumber } from '../env.js';

/** The Queue's shared word that puts bump once their datagram is sent (NOTE [Spinning before sleeping]). */
export const SENT = 16; // its own cache line: the producer's slot CAS on COUNT does not contend with a spinning reader

const MAX_BACKOFF = 8;

function spinUs(): number {
  const us = envNumber('TENSORPROC_SPIN_US') ?? ENV.TENSORPROC_SPIN_US.default;
  return us > 0 && availableParallelism() > 1 ? us : 0;
}

const SPIN_US = spinUs();

/** Spins that come to nothing back off (NOTE [Spinning before sleeping]), per queue and side. */
class Spin {
  protected readonly mapping: NativeMapping;
  #fails = 0;
  #skip = 0;

  constructor(mapping: NativeMapping) {
    this.mapping = mapping;
  }

  /** Whether this call may spin (spinning is on, and not backed off). */
  protected mays(): boolean {
    if (SPIN_US === 0) return false;
    if (this.#skip > 0) {
      this.#skip--;
      return false;
    }
    return true;
  }

  /** Watches the word at `byteOffset` until it leaves `expected` or the bound (or `timeoutMs`) passes. */
  protected watch(byteOffset: number, expected: number, timeoutMs: number | null): boolean {
    const us = timeoutMs === null ? SPIN_US : Math.min(SPIN_US, timeoutMs * 1000);
    if (addon.spinWhile(this.mapping, byteOffset, expected, us)) {
      this.#fails = 0;
      return true;
    }
    if (this.#fails < MAX_BACKOFF) this.#fails++;
    this.#skip = 2 ** this.#fails - 1;
    return false;
  }
}

export class GetSpin extends Spin {
  readonly #words: Int32Array;

  constructor(words: Int32Array, mapping: NativeMapping) {
    super(mapping);
    this.#words = words;
  }

  /** What SENT reads now, to spin on if the queue turns out empty; null when this get does not spin. */
  arm(): number | null {
    return this.mays() ? Atomics.load(this.#words, SENT) : null;
  }

  /** Watches SENT until it leaves `armed` or the bound (or `timeoutMs`) passes; returns the ms spent. */
  spin(armed: number, timeoutMs: number | null): number {
    const t0 = performance.now();
    this.watch(SENT * 4, armed, timeoutMs);
    return performance.now() - t0;
  }

  /** A put's datagram is in the socket (or queued to go: a spinning get then finds nothing, and sleeps). */
  static sent(words: Int32Array): void {
    Atomics.add(words, SENT, 1);
  }
}

/** A put on a full bounded queue (NOTE [Spinning before sleeping]). */
export class PutSpin extends Spin {
  /**
   * Watches the COUNT word (at `byteOffset`) while it reads `maxsize`, within the bound and
   * `timeoutMs`; returns the ms spent (0: this put did not spin). The caller then tries for a
   * slot as any put does, which tells whether one freed.
   */
  spin(byteOffset: number, maxsize: number, timeoutMs: number | null): number {
    if (!this.mays()) return 0;
    const t0 = performance.now();
    this.watch(byteOffset, maxsize, timeoutMs);
    return performance.now() - t0;
  }
}
