// The manager's bookkeeping: which processes map which names, and what to do with a name
// when its holders go. Policy of NOTE [The file_system manager] (server.ts).
import { addon } from '../native/index.js';
import { HEADER_BYTES, MAGIC, W_MAGIC, W_PID, W_REFS, holders, reclaimSlots, wakeCreator } from '../sharing/segment-header.js';
import { creatorOf, NAME_PATTERN } from '../sharing/manager/protocol.js';
import { isAlive } from '../sharing/liveness.js';
import { PidWatch } from './pid-watch.js';
import { createdBy, deadCreatorNames, isMine, isOwnFile } from './sweep.js';
import { ENV, envNumber } from '../env.js';

/** How long a name whose holders died keeps the references of its messages in flight. */
export const CRASH_GRACE_MS = 1000;
/**
 * How long a name whose holders all let go keeps its references in flight, at least
 * (TENSORPROC_MANAGER_CLEAN_GRACE_MS: tests that must tell the two graces apart on a loaded
 * machine lengthen it, rather than race the kill against it).
 */
export const CLEAN_GRACE_MS = envNumber('TENSORPROC_MANAGER_CLEAN_GRACE_MS', (n) => n > 0) ?? ENV.TENSORPROC_MANAGER_CLEAN_GRACE_MS.default;
/** How long a dead process's connections may stay open before its death is judged anyway. */
const DEATH_READ_MS = 200;

interface Proc {
  readonly pid: number;
  /** Names it registered, or that its slot holds. */
  readonly names: Set<string>;
  conns: number;
  /** It connected (a user of named segments), as opposed to a holder found in a slot. */
  user: boolean;
  /** A connection of it closed without goodbye: it died, or a thread of it ended abruptly. */
  crashed: boolean;
  /** It exited while connections of it were still open here: judged once they close. */
  exited: NodeJS.Timeout | null;
}

interface NameState {
  /** Live processes known to map it. */
  readonly holders: Set<number>;
  /** A holder died holding references, or without saying goodbye. */
  crashed: boolean;
  /** When it is to be judged again (the end of a grace, or a retry). */
  graceTimer: NodeJS.Timeout | null;
  /** When it was first seen with references in flight only, after a crash. */
  crashSince: number | null;
  /** When it was first seen with references in flight only, after clean exits. */
  orphanSince: number | null;
}

/** Errors that say "try again later" rather than anything about the segment. */
const TRANSIENT = new Set(['EMFILE', 'ENFILE', 'ENOMEM', 'EAGAIN', 'EINTR']);
const RETRY_MS = 100;

export class Registry {
  readonly #procs = new Map<number, Proc>();
  readonly #names = new Map<string, NameState>();
  readonly #uid = process.getuid!();
  readonly #log: (line: string) => void;
  readonly #changed: () => void;
  /** Reports the exit of every process followed here (pid-watch.ts). */
  readonly #pids = new PidWatch((pid) => this.#died(pid));
  /** When the last user to go died without saying goodbye (killed); null if it left cleanly. */
  #lastUserKilled: number | null = null;

  /** Called when a user (a process that connected) has died: its named objects' entries may be stale. */
  readonly #userGone: () => void;

  /** `changed()` is called when the registry may have become empty (the manager may stop). */
  constructor(log: (line: string) => void, changed: () => void, userGone: () => void = () => {}) {
    this.#log = log;
    this.#changed = changed;
    this.#userGone = userGone;
  }

  /** Nothing to watch: no name pending and no process followed. */
  get idle(): boolean {
    return this.#names.size === 0 && this.#procs.size === 0;
  }

  /**
   * A process connected. False if it is already gone: killed after its connect() and before
   * this accept(), its pidfd can no longer be had, and no death of it will be seen, so the
   * names it created are judged now, as a crash's (NOTE [Registering before creating] in
   * segment.ts).
   */
  connected(pid: number): boolean {
    const proc = this.#watch(pid);
    if (proc === null) {
      const names = createdBy(pid, this.#uid);
      // Logged before the judgement, so that the log reads in the order things happened: a
      // reader who sees a name gone finds its reason already written (the unlink is the last step).
      this.#log(`pid ${pid} was gone when its connection was accepted: ${names.size} name(s) it created judged`);
      for (const name of names) {
        this.#state(name).crashed = true;
        this.#evaluate(name);
      }
      this.#userGone();
      this.#changed();
      return false;
    }
    proc.conns++;
    proc.user = true;
    return true;
  }

  /** One of its connections closed; `clean` if it said goodbye first. */
  disconnected(pid: number, clean: boolean): void {
    const proc = this.#procs.get(pid);
    if (proc !== undefined) {
      proc.conns--;
      if (!clean) proc.crashed = true;
      if (proc.conns <= 0 && proc.exited !== null) this.#judgeDeath(proc);
    }
    this.#changed();
  }

  hold(pid: number, names: string[]): void {
    const proc = this.#watch(pid);
    if (proc === null) return;
    for (const name of names) {
      proc.names.add(name);
      this.#state(name).holders.add(pid);
    }
  }

  drop(pid: number, names: string[]): void {
    const proc = this.#procs.get(pid);
    for (const name of names) {
      proc?.names.delete(name);
      const st = this.#names.get(name);
      if (st === undefined) continue;
      st.holders.delete(pid);
      if (st.holders.size === 0) this.#evaluate(name);
    }
    if (proc !== undefined) this.#maybeUnwatch(proc);
    this.#changed();
  }

  /**
   * At start: names of this user whose creator is dead, left by processes that died while
   * no manager ran. Each is judged like any other (live holders keep it).
   */
  sweep(): void {
    const names = deadCreatorNames(this.#uid, (name) => this.#names.has(name));
    for (const name of names) {
      this.#state(name).crashed = true;
      this.#evaluate(name);
    }
    this.#log(`swept /dev/shm at start: ${names.length} name(s) of dead creators judged`);
    this.#changed();
  }

  #state(name: string): NameState {
    let st = this.#names.get(name);
    if (st === undefined)
      this.#names.set(name, (st = { holders: new Set(), crashed: false, graceTimer: null, crashSince: null, orphanSince: null }));
    return st;
  }

  #watch(pid: number): Proc | null {
    const known = this.#procs.get(pid);
    if (known !== undefined) return known;
    if (!this.#pids.watch(pid)) return null;
    const proc: Proc = { pid, names: new Set(), conns: 0, user: false, crashed: false, exited: null };
    this.#procs.set(pid, proc);
    return proc;
  }

  /** Out of descriptors: follow every process by polling instead, freeing its pidfd. */
  shedPidfds(): void {
    this.#pids.shed();
  }

  #unwatch(proc: Proc): void {
    this.#procs.delete(proc.pid);
    if (proc.exited !== null) clearTimeout(proc.exited);
    this.#pids.forget(proc.pid);
  }

  // Users are followed until they die: while one lives, it may still receive a message in
  // flight (the clean rule). Holders found in slots only while they hold something.
  #maybeUnwatch(proc: Proc): void {
    if (!proc.user && proc.names.size === 0) this.#unwatch(proc);
  }

  #liveUsers(): number {
    let n = 0;
    for (const proc of this.#procs.values()) if (proc.user) n++;
    return n;
  }

  /**
   * A process exited (its pidfd polled readable, or polling found it gone). Its pidfd can
   * poll readable before its connections' last datagrams (drops, goodbye) and their end are
   * read here. Judged now, a process killed in the middle of its exit would count as a clean
   * exit, whose messages in flight are kept while any user lives, instead of for the crash
   * grace. So while a connection of it is open, the judgement waits for disconnected(); the
   * kernel closed its sockets before its pidfd became readable, so that is a turn of the
   * loop, and the timer covers a connection some other process somehow kept open. The pidfd
   * poll stops meanwhile: a dead process's pidfd stays readable and would call again.
   */
  #died(pid: number): void {
    const proc = this.#procs.get(pid);
    if (proc === undefined || proc.exited !== null) return;
    if (proc.conns > 0) {
      this.#log(`pid ${pid} exited with ${proc.conns} connection(s) not yet read to their end: judged when they are`);
      this.#pids.quiet(pid);
      proc.exited = setTimeout(() => this.#judgeDeath(proc), DEATH_READ_MS);
      return;
    }
    this.#judgeDeath(proc);
  }

  /** What a dead process held goes, and its names are judged. */
  #judgeDeath(proc: Proc): void {
    if (this.#procs.get(proc.pid) !== proc) return; // judged already
    const pid = proc.pid;
    // Only the last user to go decides: a clean exit after a kill means the messages in
    // flight were meant for later (the clean grace), not lost in the killed one's queues.
    if (proc.user) this.#lastUserKilled = proc.crashed ? Date.now() : null;
    this.#unwatch(proc);
    // With the names it created whose registration it had no time to send (killed within a turn).
    const names = createdBy(pid, this.#uid, proc.names);
    // Logged first, as in connected(): what a removal below logs comes after its cause.
    this.#log(`swept after pid ${pid} ${proc.crashed ? 'died' : 'left'}: ${names.size} name(s) judged`);
    for (const name of names) {
      if (!NAME_PATTERN.test(name)) continue;
      const st = this.#state(name);
      st.holders.delete(pid);
      if (proc.crashed) st.crashed = true;
      this.#evaluate(name);
    }
    // One receiver fewer: names waiting for one may have none left.
    if (proc.user) for (const [name, st] of this.#names) if (st.holders.size === 0 && !names.has(name)) this.#evaluate(name);
    if (proc.user) this.#userGone();
    this.#changed();
  }

  /**
   * Looks at a name's header: takes back what dead holders held, and removes the name when
   * nothing is left, or when only references in flight are left and the rules say so.
   */
  #evaluate(name: string): void {
    const st = this.#state(name);
    // Not opened unless it is a regular file of ours (opening a FIFO, say, is not harmless).
    if (!isMine(name.slice(1), this.#uid)) return this.#forget(name);
    let fd: number;
    try {
      fd = addon.shmOpen(name);
    } catch (e) {
      if (TRANSIENT.has((e as { code?: string }).code ?? '')) return this.#schedule(name, st, RETRY_MS);
      return this.#forget(name); // gone already (its last holder removed it), or not ours
    }
    let total = 0;
    let took = 0;
    let valid = false;
    let foreign = false;
    const live: number[] = [];
    try {
      const [size, , , mode, uid] = addon.fstat(fd);
      // Checked again on what was opened: the name may have been replaced since isMine().
      if (!isOwnFile(mode, uid, this.#uid)) return this.#forget(name);
      if (size >= HEADER_BYTES) {
        const m = addon.map(fd, HEADER_BYTES);
        try {
          const h = new Int32Array(addon.sharedBuffer(m, 0, HEADER_BYTES));
          const magic = Atomics.load(h, W_MAGIC);
          // A header that does not name the name's creator is not a segment we understand.
          if (magic !== 0 && (magic !== MAGIC || Atomics.load(h, W_PID) !== creatorOf(name))) foreign = true;
          if (magic === MAGIC && !foreign) {
            valid = true;
            for (const [pid, count] of holders(h)) {
              if (!isAlive(pid)) took += reclaimSlots(h, pid);
              else if (count > 0) live.push(pid);
            }
            total = Atomics.load(h, W_REFS);
            // Its creator may be waiting for it to come back (NOTE [Waiting for a segment]):
            // what a dead holder held is let go here, so the wake is ours to give.
            if (took > 0) wakeCreator(h, m, total);
          }
        } finally {
          addon.unmap(m);
        }
      }
    } catch (e) {
      this.#log(`cannot read ${name}: ${(e as Error).message}`);
      if (TRANSIENT.has((e as { code?: string }).code ?? '')) return this.#schedule(name, st, RETRY_MS);
      return this.#forget(name);
    } finally {
      addon.close(fd);
    }
    if (foreign) return this.#forget(name);
    if (!valid) {
      // No header yet: its creator is still building it, or died doing so.
      if (isAlive(creatorOf(name))) return this.#forget(name);
      return this.#unlink(name, 'its creator died before finishing it');
    }
    if (took > 0) st.crashed = true;
    if (total <= 0) return this.#unlink(name, took > 0 ? `its holders died holding ${took} reference(s)` : 'no reference is left');
    if (live.length > 0) {
      // Someone still holds it. Follow them, so that their death brings us back here.
      this.#cancelTimer(st);
      st.orphanSince = null;
      st.crashSince = null;
      st.crashed = false; // how the *last* holders leave decides (the rules below)
      for (const pid of live) {
        const proc = this.#watch(pid);
        if (proc === null) continue;
        proc.names.add(name);
        st.holders.add(pid);
      }
      return;
    }
    // Only references in flight are left: messages that carry the segment and that a live
    // process may still receive.
    const now = Date.now();
    if (st.crashed) {
      // From the crash on, even if a clean grace was already running (the holders let go,
      // then one of them turned out to have crashed).
      st.crashSince ??= now;
      const wait = st.crashSince + CRASH_GRACE_MS - now;
      if (wait <= 0)
        return this.#unlink(name, `${total} reference(s) in flight were not taken within ${CRASH_GRACE_MS} ms of its holders' death`);
      return this.#schedule(name, st, wait);
    }
    st.orphanSince ??= now;
    const wait = st.orphanSince + CLEAN_GRACE_MS - now;
    // With no user left and the last to go killed (NOTE [The file_system manager]), the
    // messages were most likely in its queues: the crash grace from its death, not more.
    const noUser = this.#liveUsers() === 0;
    const cut = noUser && this.#lastUserKilled !== null ? this.#lastUserKilled + CRASH_GRACE_MS - now : Infinity;
    if (wait > 0 && cut > 0) return this.#schedule(name, st, Math.min(wait, cut));
    if (noUser && wait > 0)
      return this.#unlink(
        name,
        `${total} reference(s) in flight, and the last process that could take them was killed over ${CRASH_GRACE_MS} ms ago`,
      );
    if (noUser) return this.#unlink(name, `${total} reference(s) in flight and no process left to take them`);
    // Kept while a user lives (it may still receive the message); judged again at each death.
  }

  /** Judges `name` again in `ms` (replacing any timer it had). */
  #schedule(name: string, st: NameState, ms: number): void {
    this.#cancelTimer(st);
    st.graceTimer = setTimeout(() => {
      st.graceTimer = null;
      this.#evaluate(name);
      this.#changed();
    }, ms);
  }

  #cancelTimer(st: NameState): void {
    if (st.graceTimer !== null) clearTimeout(st.graceTimer);
    st.graceTimer = null;
  }

  #unlink(name: string, why: string): void {
    try {
      addon.shmUnlink(name);
      this.#log(`removed ${name}: ${why}`);
    } catch {
      // removed meanwhile by its last holder
    }
    this.#forget(name);
  }

  #forget(name: string): void {
    const st = this.#names.get(name);
    if (st === undefined) return;
    this.#cancelTimer(st);
    this.#names.delete(name);
    for (const pid of st.holders) {
      const proc = this.#procs.get(pid);
      if (proc === undefined) continue;
      proc.names.delete(name);
      this.#maybeUnwatch(proc);
    }
  }
}
