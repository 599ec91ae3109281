// The garbage trial of the fault campaign (NOTE [Fault trials] in plan.ts): this process, a
// peer of the same user, writes into a channel's socket the datagrams no tensorproc process
// sends: frames of real messages with bytes flipped, cut short or lengthened, descriptors
// dropped or foreign ones added, random bytes, empty datagrams; under file_system, tensor
// frames naming what no segment is (garbage-names.ts). A consumer child gets each: a value
// or a coded error (a hostile name: a coded error), never a crash, a hang or a leaked
// descriptor, and the real message after them all.
import { closeSync, ftruncateSync, openSync, unlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as mp from '../../src/index.js';
import { addon } from '../../src/native/index.js';
import { MAX_FRAME, encodeMessage } from '../../src/transport/index.js';
import { hostileNames, type HostileNames } from './garbage-names.js';
import { Prng } from './prng.js';
import { put, type GarbageAck } from './targets.js';
import { joinClean, makeChannel, target, type Trial } from './trial-kit.js';

export const GARBAGE_DATAGRAMS = 60;

/** A message to start from: what the library sends, tensors included (file_descriptor only: see below). */
function baseMessage(r: Prng, k: number, tensors: boolean): { value: unknown; tensors: mp.Tensor[] } {
  const kind = r.int(0, tensors ? 4 : 2);
  if (kind === 0) return { value: r.next() * 1e6, tensors: [] };
  if (kind === 1) return { value: 'x'.repeat(r.int(0, 300)), tensors: [] };
  if (kind === 2) return { value: { k, list: [1, 2, 3], nested: { s: 'abc', n: null, b: true } }, tensors: [] };
  const t = mp.full([r.int(1, 2048)], k, { shared: true, dtype: r.pick(['float32', 'int32', 'uint8'] as const) });
  if (kind === 3) return { value: t, tensors: [t] };
  const u = t.narrow(0, 0, 1);
  return { value: { t, u, meta: { k } }, tensors: [t] };
}

/**
 * Descriptors a hostile peer may send where a segment's belongs, each with what it is: none
 * may be mapped (an unsealed file can be shrunk under the mapping: SIGBUS), and each must be
 * closed by the receiver whatever happens.
 */
export interface Foreign {
  fd: number;
  what: string;
}

/** Changes `bytes` and `fds` as a hostile peer might; says how. */
function mutate(
  r: Prng,
  bytes: Uint8Array,
  fds: number[],
  devNull: number,
  foreign: readonly Foreign[],
): { bytes: Uint8Array; fds: number[]; how: string } {
  const b = Uint8Array.from(bytes);
  switch (r.int(0, 10)) {
    case 0: {
      const n = r.int(1, 4);
      for (let i = 0; i < n && b.length; i++) b[r.int(0, b.length - 1)] ^= 1 << r.int(0, 7);
      return { bytes: b, fds, how: `${n} bit(s) flipped` };
    }
    case 1: {
      const at = r.int(0, b.length);
      for (let i = at; i < Math.min(b.length, at + 8); i++) b[i] = r.int(0, 255);
      return { bytes: b, fds, how: `8 bytes at ${at} randomized` };
    }
    case 2: {
      const len = r.int(0, Math.max(0, b.length - 1));
      return { bytes: b.subarray(0, len), fds, how: `cut to ${len} of ${b.length} bytes` };
    }
    case 3: {
      const more = Uint8Array.from({ length: r.int(1, 64) }, () => r.int(0, 255));
      const c = new Uint8Array(b.length + more.length);
      c.set(b);
      c.set(more, b.length);
      return { bytes: c, fds, how: `${more.length} bytes appended` };
    }
    case 4:
      return { bytes: b, fds: [], how: `its ${fds.length} descriptor(s) left out` };
    case 5:
      return { bytes: b, fds: [...fds, devNull], how: 'a /dev/null descriptor added' };
    case 6:
      return {
        bytes: Uint8Array.from({ length: r.int(1, 200) }, () => r.int(0, 255)),
        fds: r.next() < 0.3 ? [devNull] : [],
        how: 'random bytes',
      };
    case 7: {
      // The frame as it is, with a descriptor of another kind in the place of its first.
      const f = r.pick(foreign);
      return { bytes: b, fds: fds.length ? [f.fd, ...fds.slice(1)] : [f.fd], how: `its first descriptor replaced by ${f.what}` };
    }
    case 8: {
      // Larger than any frame: the receive buffer cannot hold it (MSG_TRUNC).
      const n = MAX_FRAME + r.int(1, 4096);
      return {
        bytes: Uint8Array.from({ length: n }, (_, i) => b[i % Math.max(1, b.length)] ?? 0),
        fds: r.next() < 0.5 ? [devNull] : [],
        how: `${n} bytes, past the largest frame`,
      };
    }
    case 9:
      return { bytes: new Uint8Array(0), fds: [devNull], how: 'an empty datagram with a descriptor' };
    default:
      return { bytes: new Uint8Array(0), fds: [], how: 'an empty datagram' };
  }
}

export async function garbage(t: Trial): Promise<void> {
  const p = t.p;
  const r = new Prng(p.seed ^ 0x1b873593);
  const ch = makeChannel(p);
  const acks = new mp.SimpleQueue<GarbageAck | { fdsBefore: number; fdsAfter: number; room: number | null }>();
  const ctx = mp.spawn(target('consumeGarbage'), { args: [ch.consumerEnd, acks, GARBAGE_DATAGRAMS, p.maxsize], join: false });
  t.phase('started', { consumer: ctx.pids() });
  // The socket this end writes into: a queue's sending descriptor, a pipe end's own.
  const own = encodeMessage(ch.producerEnd);
  const sendFd = own.fds[0]!;
  own.abandon();
  const devNull = openSync('/dev/null', 'r');
  // A sealed memfd too small for any header, one of a segment's size with no header, a file
  // that can be shrunk (not sealed), and the channel's own socket.
  const unsealedPath = join(tmpdir(), `tensorproc-garbage-${process.pid}`);
  const unsealed = openSync(unsealedPath, 'w+');
  unlinkSync(unsealedPath);
  ftruncateSync(unsealed, 1 << 16);
  const foreign: Foreign[] = [
    { fd: devNull, what: '/dev/null' },
    { fd: addon.memfdCreate('garbage-small', 16), what: 'a sealed 16-byte memfd' },
    { fd: addon.memfdCreate('garbage-headerless', 1 << 16), what: 'a sealed 64 KiB memfd without a header' },
    { fd: unsealed, what: 'an unsealed 64 KiB file' },
    { fd: sendFd, what: "the channel's own socket" },
  ];
  // Tensors sent in mutated frames are never given back (whether the receiver adopted them
  // is not known here), so they are kept to the end, where this process's exit frees them:
  // memfds only, which leave nothing in /dev/shm.
  const tensors = p.strategy === 'file_descriptor';
  const keep: mp.Tensor[] = [];
  const counts = new Map<string, number>();
  let names: HostileNames | null = null;
  try {
    names = tensors ? null : hostileNames();
    for (let k = 0; k < GARBAGE_DATAGRAMS; k++) {
      let m: { bytes: Uint8Array; fds: number[]; how: string };
      let hostile = false;
      if (names !== null && r.next() < 0.4) {
        const n = names.frame(r);
        m = { bytes: n.bytes, fds: r.next() < 0.2 ? [devNull] : [], how: n.how };
        hostile = true;
        t.phase(`datagram ${k}: ${m.how}`);
        if (addon.send(sendFd, m.bytes, Int32Array.from(m.fds)) < 0) t.fail('error', `datagram ${k} did not fit in the socket`);
      } else {
        const base = baseMessage(r, k, tensors);
        keep.push(...base.tensors);
        const frame = encodeMessage(base.value);
        m = mutate(r, frame.bytes, [...frame.fds], devNull, foreign);
        t.phase(`datagram ${k}: a frame of ${frame.bytes.length} bytes and ${frame.fds.length} descriptor(s), ${m.how}`);
        if (addon.send(sendFd, m.bytes, Int32Array.from(m.fds)) < 0) t.fail('error', `datagram ${k} did not fit in the socket`);
        if (base.tensors.length === 0) frame.abandon();
      }
      const ack = (await acks.get()) as GarbageAck;
      if (ack.uncoded) t.fail('uncoded-error', `datagram ${k} (${m.how}): ${ack.uncoded}`);
      else if (hostile && ack.got !== undefined) t.fail('accepted-hostile', `datagram ${k} (${m.how}) was received as a ${ack.got}`);
      const key = ack.code ?? 'a value';
      counts.set(key, (counts.get(key) ?? 0) + 1);
    }
    t.phase('the real message');
    await put(ch.producerEnd, { final: true });
    const end = (await acks.get()) as { fdsBefore: number; fdsAfter: number; room: number | null };
    if (end.fdsAfter > end.fdsBefore)
      t.fail('fd-leak', `the consumer had ${end.fdsBefore} descriptors open before the garbage and ${end.fdsAfter} after`);
    if (end.room !== null && end.room !== p.maxsize)
      t.fail('slots', `the emptied Queue(${p.maxsize}) took ${end.room} messages after the garbage, not ${p.maxsize}`);
    await joinClean(t, ctx, 'consumer');
    const touched = names?.check() ?? null;
    if (touched !== null) t.fail('foreign-touched', touched);
    t.stats.outcomes = Object.fromEntries(counts);
  } finally {
    names?.close();
    for (const f of foreign) if (f.fd !== sendFd) closeSync(f.fd);
    for (const x of keep) x.release();
    ch.close();
    acks.close();
  }
}
