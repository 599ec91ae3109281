// The children of the fault campaign's trials (targets of mp.spawn): producers that fill each
// tensor with its own id, consumers that check every tensor twice (when it arrives and again
// before they let go of it, so that a segment reused under a holder shows) and mark what they
// got in a shared tensor, and holders that keep what they got until they are killed.
import { closeSync, openSync, readdirSync } from 'node:fs';
import * as mp from '../../src/index.js';

/** The value every element of message `seq` of producer `from` holds. */
export const stamp = (from: number, seq: number): number => from * 1_000_000 + seq;

/** A channel as a child sees it: a queue, or its end of a Pipe. */
export type Channel = mp.Queue<unknown> | mp.SimpleQueue<unknown> | mp.Connection<unknown>;

export function put(ch: Channel, x: unknown): Promise<void> {
  return ch instanceof mp.Connection ? ch.send(x) : ch.put(x);
}

export function get(ch: Channel): Promise<unknown> {
  return ch instanceof mp.Connection ? ch.recv() : ch.get();
}

export interface Message {
  from: number;
  seq: number;
  t: mp.Tensor;
}

/** What is wrong with message `m`, or null: its tensor must hold stamp(from, seq) everywhere it is sampled. */
export function checkMessage(m: unknown, elements: number): string | null {
  if (typeof m !== 'object' || m === null) return `not a message: ${String(m)}`;
  const { from, seq, t } = m as Message;
  if (!(t instanceof mp.Tensor)) return `message ${from}/${seq} without a tensor`;
  if (t.dtype !== 'int32' || t.numel() !== elements)
    return `message ${from}/${seq}: ${t.dtype} of ${t.numel()} elements, not int32 of ${elements}`;
  const want = stamp(from, seq);
  const d = t.data as Int32Array;
  // Every element of a small tensor; one in each 4 KiB page (and the last) of a large one.
  const step = elements <= 4096 ? 1 : 1021;
  for (let i = 0; i < elements; i += step) if (d[i] !== want) return `message ${from}/${seq}: element ${i} is ${d[i]}, not ${want}`;
  if (d[elements - 1] !== want) return `message ${from}/${seq}: its last element is ${d[elements - 1]}, not ${want}`;
  return null;
}

/** Producer `i`: puts `count` messages (null: until killed), each a fresh tensor of `elements` int32. */
export async function produce(i: number, ch: Channel, elements: number, count: number | null, from: number | null): Promise<void> {
  const id = from ?? i;
  for (let seq = 0; count === null || seq < count; seq++) {
    const t = mp.empty([elements], { dtype: 'int32', shared: true }).fill(stamp(id, seq));
    await put(ch, { from: id, seq, t });
    t.release();
  }
  ch.close();
}

export interface ConsumerReport {
  consumer: number;
  got: number;
  /** The first few problems: a bad tensor, an order broken, an error from get. */
  problems: string[];
}

/**
 * Consumer `i` (row `row ?? i` of `seen`): takes messages until a null, checks each, counts it
 * in `seen[row][from * perProducer + seq]` when `seen` is given (that row is written by this
 * process alone), sets `flowing` at the first, keeps the last `hold` tensors, and reports.
 */
export async function consume(
  i: number,
  ch: Channel,
  out: mp.SimpleQueue<ConsumerReport>,
  flowing: mp.Event,
  elements: number,
  seen: mp.Tensor | null,
  perProducer: number,
  row: number | null,
  hold: number,
): Promise<void> {
  const r = row ?? i;
  const marks = seen === null ? null : (seen.select(0, r).data as Int32Array);
  const problems: string[] = [];
  const last = new Map<number, number>();
  const held: mp.Tensor[] = [];
  let got = 0;
  for (;;) {
    let m: unknown;
    try {
      m = await get(ch);
    } catch (e) {
      problems.push(`get: ${(e as { code?: string }).code ?? ''} ${String(e)}`);
      if (problems.length >= 5) break;
      continue;
    }
    if (m === null) break;
    if (got++ === 0) flowing.set();
    const bad = checkMessage(m, elements);
    if (bad !== null) {
      problems.push(bad);
      if (problems.length >= 5) break;
      continue;
    }
    const { from, seq, t } = m as Message;
    // Messages of one producer arrive in the order it sent them, whoever else takes some.
    if ((last.get(from) ?? -1) >= seq) problems.push(`message ${from}/${seq} after ${from}/${last.get(from)}`);
    last.set(from, seq);
    if (marks !== null) marks[from * perProducer + seq] = marks[from * perProducer + seq]! + 1;
    await new Promise((resolve) => setImmediate(resolve));
    const later = checkMessage(m, elements);
    if (later !== null) problems.push(`while held: ${later}`);
    held.push(t);
    if (held.length > hold) held.shift()!.release();
    if (problems.length >= 5) break;
  }
  for (const t of held) t.release();
  await out.put({ consumer: r, got, problems });
  for (const x of [ch, out, flowing]) x.close();
}

/** Takes `n` tensors, keeps them, sets `ready`, and waits to be killed. */
export async function holdUntilKilled(_i: number, ch: Channel, ready: mp.Event, n: number): Promise<void> {
  const held: unknown[] = [];
  for (let k = 0; k < n; k++) held.push(await get(ch));
  ready.set();
  // A timer keeps the process (and `held`) alive: a promise nobody settles would let the
  // event loop run dry and the process exit by itself while it is being killed.
  setInterval(() => held.length, 2 ** 30);
  await new Promise(() => {});
}

/**
 * Producer for a full /dev/shm: puts `count` messages; when a tensor cannot be made
 * (ERR_TP_SHM_FULL) it says so on `out`, waits for `go`, and tries again. Any other error
 * fails the child.
 */
export async function produceThroughFull(
  _i: number,
  ch: Channel,
  out: mp.SimpleQueue<unknown>,
  go: mp.Event,
  elements: number,
  count: number,
): Promise<void> {
  for (let seq = 0; seq < count; seq++) {
    let t: mp.Tensor;
    for (;;) {
      try {
        t = mp.empty([elements], { dtype: 'int32', shared: true }).fill(stamp(0, seq));
        break;
      } catch (e) {
        if (!(e instanceof mp.ShmFullError) || e.code !== 'ERR_TP_SHM_FULL') throw e;
        await out.put({ full: seq });
        if (!(await go.wait(20_000))) throw new Error('never told to go on');
        go.clear();
      }
    }
    await put(ch, { from: 0, seq, t });
    t.release();
  }
  await out.put({ done: count });
  for (const x of [ch, out, go]) x.close();
}

/** produce(), once `started` is set (the parent lowers this process's limits first). */
export async function produceAfter(i: number, ch: Channel, started: mp.Event, elements: number, count: number): Promise<void> {
  if (!(await started.wait(20_000))) throw new Error('never told to start');
  started.close();
  await produce(i, ch, elements, count, 0);
}

export interface GarbageAck {
  k: number;
  /** A value arrived (its type), or the error's code, or an error without one. */
  got?: string;
  code?: string;
  uncoded?: string;
}

function releaseAll(v: unknown): void {
  if (v instanceof mp.Tensor) v.release();
  else if (typeof v === 'object' && v !== null) for (const x of Object.values(v)) if (x instanceof mp.Tensor) x.release();
}

/** `n` gets of garbage (trial-garbage.ts), each acknowledged on `acks`; then the real message; then its descriptors. */
export async function consumeGarbage(_i: number, ch: Channel, acks: mp.SimpleQueue<unknown>, n: number, maxsize: number): Promise<void> {
  const openFds = (): number => readdirSync('/proc/self/fd').length;
  const fdsBefore = openFds();
  for (let k = 0; k < n; k++) {
    try {
      const v = await get(ch);
      releaseAll(v);
      await acks.put({ k, got: typeof v } satisfies GarbageAck);
    } catch (e) {
      const code = (e as { code?: unknown }).code;
      if (typeof code === 'string' && code.startsWith('ERR_TP_')) await acks.put({ k, code } satisfies GarbageAck);
      else await acks.put({ k, uncoded: String((e as Error)?.stack ?? e).slice(0, 400) } satisfies GarbageAck);
    }
  }
  const last = await get(ch);
  if (JSON.stringify(last) !== '{"final":true}') throw new Error(`the real message came as ${JSON.stringify(last)}`);
  mp.emptyCache();
  // A bounded queue, emptied, takes maxsize messages and no more: garbage took no slot, so
  // none may be given back for it (qsize() cannot tell: it never shows less than 0).
  let room: number | null = null;
  if (ch instanceof mp.Queue && maxsize > 0) {
    room = 0;
    try {
      while (room <= maxsize) await ch.put(room, { timeout: 0 }), room++;
    } catch (e) {
      if (!(e instanceof mp.QueueFullError)) throw e;
    }
    for (let k = 0; k < room; k++) await ch.get({ timeout: 10_000 });
  }
  await acks.put({ fdsBefore, fdsAfter: openFds(), room });
  for (const x of [ch, acks]) x.close();
}

/**
 * Takes `n` tensors from `ch` and keeps them, makes one shared tensor of its own (a name with
 * its pid under file_system), says which names are its own on `out`, and waits to be killed.
 */
export async function holdAndMake(_i: number, ch: Channel, out: mp.SimpleQueue<unknown>, n: number): Promise<void> {
  const held: unknown[] = [];
  for (let k = 0; k < n; k++) held.push(await get(ch));
  held.push(mp.zeros([1024], { dtype: 'int32', shared: true }));
  const own = readdirSync('/dev/shm').filter((name) => name.startsWith(`tensorproc_${process.pid}_`));
  await out.put({ own });
  setInterval(() => held.length, 2 ** 30); // alive until killed (see holdUntilKilled)
  await new Promise(() => {});
}

/** Opens /dev/null until the descriptor table is full (EMFILE); returns what it opened. */
function fillDescriptorTable(): number[] {
  const files: number[] = [];
  try {
    for (;;) files.push(openSync('/dev/null', 'r'));
  } catch (e) {
    if ((e as { code?: string }).code !== 'EMFILE') {
      for (const f of files) closeSync(f);
      throw e;
    }
  }
  return files;
}

/**
 * A consumer under a low open-file limit (the parent lowers it before `started`): takes
 * `count` messages of producer 0 and keeps their tensors. After `fillAt` of them it gives back
 * what the library keeps (emptyCache) and fills its descriptor table itself (the library
 * sheds the descriptors it keeps for held tensors when one is needed, NOTE [Kept
 * descriptors], so holding tensors alone never runs a receive out). A get out of descriptors must be ERR_TP_TOO_MANY_FILES with the
 * message still there: it lets go of half of what it holds and of two of its files, and
 * gets again, expecting the very message it was refused.
 */
export async function consumeUnderLimit(
  _i: number,
  ch: Channel,
  out: mp.SimpleQueue<unknown>,
  started: mp.Event,
  elements: number,
  count: number,
  fillAt: number,
): Promise<void> {
  if (!(await started.wait(20_000))) throw new Error('never told to start');
  const held: mp.Tensor[] = [];
  const problems: string[] = [];
  let files: number[] | null = null;
  let errors = 0;
  let mostHeld = 0;
  for (let seq = 0; seq < count && problems.length < 5; ) {
    if (seq === fillAt && files === null) {
      // Given back first: the descriptors kept for held tensors and the receive reserve, which
      // the library would otherwise shed for the next receive (then nothing ever runs out).
      mp.emptyCache();
      files = fillDescriptorTable();
    }
    let m: unknown;
    try {
      m = await get(ch);
    } catch (e) {
      if (!(e instanceof mp.TooManyFilesError) || e.code !== 'ERR_TP_TOO_MANY_FILES') {
        problems.push(`get: ${(e as { code?: string }).code ?? ''} ${String(e)}`);
        continue;
      }
      if (++errors > 50) {
        problems.push(`get: still out of descriptors after ${errors} tries, holding ${held.length}`);
        break;
      }
      for (const x of held.splice(0, Math.ceil(held.length / 2))) x.release();
      for (let k = 0; k < 2 && files !== null && files.length > 0; k++) closeSync(files.pop()!);
      mp.emptyCache();
      continue;
    }
    const bad = checkMessage(m, elements);
    if (bad !== null) problems.push(bad);
    else if ((m as Message).seq !== seq) problems.push(`message ${(m as Message).seq} where ${seq} was due`);
    else held.push((m as Message).t);
    mostHeld = Math.max(mostHeld, held.length);
    seq++;
  }
  for (const f of files ?? []) closeSync(f);
  for (const x of held) x.release();
  await out.put({ problems, errors, mostHeld });
  for (const x of [ch, out, started]) x.close();
}

/**
 * Takes messages for good and keeps every tensor, counting message `seq` in `seen[seq]` once it
 * has it; sets `flowing` at the first. Killed by the trial at a random point of its receive
 * path (kill-receivers).
 */
export async function keepUntilKilled(_i: number, ch: Channel, flowing: mp.Event, seen: mp.Tensor): Promise<void> {
  const marks = seen.data as Int32Array;
  const held: mp.Tensor[] = [];
  setInterval(() => held.length, 2 ** 30); // as holdUntilKilled: alive until killed
  for (;;) {
    const { seq, t } = (await get(ch)) as Message;
    marks[seq] = marks[seq]! + 1;
    held.push(t);
    if (held.length === 1) flowing.set();
  }
}
