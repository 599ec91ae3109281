// The fault campaign's trials: each kind of attack, and the parameters of one trial drawn from
// its seed (NOTE [Fault trials]). The runner and the trial program both compute them from
// (kind, seed), so a seed printed in the summary replays the very same trial.
import { Prng } from './prng.js';

// NOTE [Fault trials]
// A trial is one process (trial.ts, the "parent") that starts real children with mp.spawn and
// attacks them, or is attacked itself by the runner (main.ts), which never loads tensorproc:
//  - kill-producer: a producer streaming to a consumer is SIGKILLed; the consumer must get
//    every message it gets whole, in order, once, and then the parent's end-of-stream.
//  - kill-consumer: a consumer of a bounded stream is SIGKILLed; a second one takes the rest.
//    No message may reach both; what the first had taken when it died is lost, nothing more.
//  - kill-parent: the parent of a streaming producer and consumer is SIGKILLed by the runner;
//    its children must die, and under file_system every name must leave /dev/shm within the
//    manager's promise (2 s) of the kill.
//  - exactly-once: 8 producers and 8 consumers on one queue; every message arrives once.
//  - holders-40: 40 consumers are SIGKILLed holding tensors (or on their way to); the
//    parent's descriptors and shared memory must come back within 1% of where they started.
//  - low-fd: a producer under an open-file limit of 256 goes on while its consumer holds
//    more tensors than that; a consumer under a limit of 128 gets ERR_TP_TOO_MANY_FILES and
//    the message at its next get.
//  - low-fd-consumer: a consumer under an open-file limit of 128 keeps what it gets, and at a
//    point drawn from the seed fills its descriptor table with /dev/null (tensors alone never
//    run it out: the library sheds the descriptors it keeps); its next get must be
//    ERR_TP_TOO_MANY_FILES and, once it lets go of some, the same message; every message
//    once, in order.
//  - shm-full: in a private tmpfs over /dev/shm (a mount namespace: needs root), a producer
//    fills it while its consumer holds; it gets ERR_TP_SHM_FULL, and goes on once the
//    consumer lets go.
//  - garbage: this process writes into a channel's socket frames of real messages with bits
//    flipped, cut short or lengthened, descriptors dropped or added, random bytes, empty
//    datagrams; the consumer child gets a value or a coded error for each (no crash, no
//    hang, no descriptor leaked), then the real message.
//  - bad-input: random arguments through the public API (fast-check, from the seed), each
//    built valid or wrong: a wrong one is refused with a coded error, a valid one works, no
//    error is uncoded, nothing hangs, a refused get loses no message (trial-bad-input.ts).
//  - kill-receivers: consumers (Queue, SimpleQueue or Pipe) are SIGKILLed at random points of
//    their receive path, 4 in a row on one channel, each keeping what it gets; the parent
//    drains the rest (every message once, but the one a consumer had in its hands), and after
//    a few housekeeping passes none of its segments may stay busy (NOTE [Orphans in flight]:
//    a reference taken in flight by a consumer that died before recording it in its slot).
//    Both strategies (file_system: NOTE [Witnesses of named segments]).
//  - other-uid: a peer of another user (uid 65534, root only) can neither open nor remove our
//    segments, nor open our descriptors through /proc, nor reach our manager; files it makes
//    under the names of a child of ours survive that child's SIGKILL (trial-other-uid.ts).
// Every random choice (strategy, size, channel, maxsize, when to kill) comes from the seed.
// The runner checks after every trial: it ended within its deadline (else: a hang, reported
// with the parent's last phase and what was still running), its own checks passed, no
// process of it is left, and nothing it made is left in /dev/shm after the graces.

export const KINDS = [
  'kill-producer',
  'kill-consumer',
  'kill-parent',
  'exactly-once',
  'holders-40',
  'low-fd',
  'shm-full',
  'garbage',
  'bad-input',
  'other-uid',
  'low-fd-consumer',
  'kill-receivers',
] as const;
export type Kind = (typeof KINDS)[number];

export type Strategy = 'file_descriptor' | 'file_system';
export type ChannelKind = 'Queue' | 'SimpleQueue' | 'Pipe';

export const KIB = 1024;
export const MIB4 = 4 << 20;

export interface Params {
  kind: Kind;
  seed: number;
  strategy: Strategy;
  bytes: number;
  channel: ChannelKind;
  /** For a Queue: its maxsize (0: unbounded). */
  maxsize: number;
  /** The kill's delay counts from the first message received (else from the children's start). */
  fromFlow: boolean;
  /** Milliseconds from that point to the SIGKILL. */
  delayMs: number;
  /** Messages per producer where the stream is bounded. */
  count: number;
  /** Tensors the consumer keeps at once (kill-parent: so that some are held when it dies). */
  hold: number;
  /** Seconds the runner gives the trial. */
  deadlineS: number;
}

export function planTrial(kind: Kind, seed: number): Params {
  const r = new Prng(seed);
  const strategy = r.pick(['file_descriptor', 'file_system'] as const);
  const big = r.next() < 0.5;
  const bytes = big ? MIB4 : KIB;
  const channel = r.pick(['Queue', 'SimpleQueue', 'Pipe'] as const);
  const maxsize = r.pick([0, 1, 2, 8, 64]);
  const fromFlow = r.next() < 0.8;
  const delayMs = r.int(0, big ? 400 : 150);
  const hold = r.pick([0, 1, 4]);
  const base: Params = {
    kind,
    seed,
    strategy,
    bytes,
    channel: channel,
    maxsize: channel === 'Queue' ? maxsize : 0,
    fromFlow,
    delayMs,
    count: big ? 40 : 2000,
    hold,
    deadlineS: 40,
  };
  switch (kind) {
    case 'exactly-once':
      // Pipe is one to one: 8 x 8 is for queues.
      return {
        ...base,
        channel: channel === 'Pipe' ? 'Queue' : channel,
        maxsize: channel === 'SimpleQueue' ? 0 : maxsize,
        count: big ? 6 : 250,
        deadlineS: 90,
      };
    case 'holders-40':
      return { ...base, channel: channel === 'Pipe' ? 'Queue' : channel, maxsize: 0, hold: r.int(1, 8), deadlineS: 150 };
    case 'low-fd':
      return { ...base, bytes: KIB, count: 600, deadlineS: 60 };
    case 'garbage':
      return { ...base, deadlineS: 60 };
    case 'bad-input':
      return { ...base, deadlineS: 120 };
    case 'kill-receivers':
      // Both strategies: file_system's messages carry a witness (NOTE [Witnesses of named segments]).
      return { ...base, maxsize: 0, delayMs: r.int(0, big ? 150 : 60), count: big ? 24 : 300, deadlineS: 60 };
    case 'low-fd-consumer':
      return { ...base, bytes: KIB, count: 400, deadlineS: 60 };
    case 'other-uid':
      return { ...base, channel: channel === 'Pipe' ? 'SimpleQueue' : channel, deadlineS: 60 };
    case 'shm-full':
      return { ...base, strategy: 'file_system', bytes: MIB4, count: 12, deadlineS: 60 };
    default:
      return base;
  }
}

export function describe(p: Params): string {
  const size = p.bytes === MIB4 ? '4MiB' : p.bytes === KIB ? '1KiB' : `${p.bytes}B`;
  const ch = p.channel === 'Queue' ? `Queue(${p.maxsize})` : p.channel;
  return `${p.strategy} ${size} ${ch} kill ${p.delayMs}ms after ${p.fromFlow ? 'first message' : 'start'} hold ${p.hold}`;
}
