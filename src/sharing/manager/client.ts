// This process's side of the file_system manager: tells it, once per mapping, which named
// segments this process maps, so that it can clean up after us if we are killed. See
// NOTE [The file_system manager] in server.ts.
//
// The connection is open exactly while this process (this thread) maps named segments: it
// opens with the first and closes, with a goodbye, when the last is unmapped (at exit, or
// emptyCache()), so that a process that holds nothing holds no descriptor for it either.
//
// Nothing here is on the hot path: a mapping or unmapping only notes a change; the changes
// go out in one datagram per turn of the event loop (a microtask), with a non-blocking send.
// The connection starts lazily with the first file_system segment; starting the manager
// (when none answers) happens in the background, and until it answers nothing waits for it.
// If it cannot be reached, a ManagerUnavailableError is emitted as a warning, once, and
// segments go on working; it is tried again with a later segment.
import { onExit } from '../../exit-hooks.js';
import { addon, EAGAIN, POLL_READABLE, POLL_WRITABLE, RECV_NO_PROBE, type NativePoll } from '../../native/index.js';
import { ManagerUnavailableError } from '../../errors.js';
import { managerDir, socketPath } from './dir.js';
import { PARENT_GONE, type EnvName } from '../../env.js';
import { connectOrStart, prestartServer, START_TIMEOUT_MS, type Prestarted } from './manager-start.js';
import { decodeManager, encode, MAX_DATAGRAM, NAMES_PER_MESSAGE, PROTOCOL_VERSION, type ClientMessage } from './protocol.js';

/** `TENSORPROC_MANAGER=0`: never start or reach a manager (no cleanup after crashes, no warning). */
export const MANAGER_ENV = 'TENSORPROC_MANAGER' satisfies EnvName;

/** After giving up, a later segment tries again after this long. */
const RETRY_AFTER_MS = 10_000;
/** Connections in a row that a manager closed before welcoming us: then something is wrong with it. */
const MAX_REFUSALS = 3;

// NOTE [No goodbye after the parent]
// The manager reads a goodbye as "let go on purpose" and keeps that process's messages in
// flight for the clean grace (and while users live), where a process killed without one
// gets the crash grace (NOTE [The file_system manager]). A child of tensorproc dies with its
// parent by SIGKILL (NOTE [No orphans]), but it may notice the death first, at the end of its
// control channel, or by a failed send, and exit through its exit hooks: it then said
// goodbye, and when a whole killed pipeline did so, its messages in flight waited the clean
// grace from the children's exit, past the 2 s promised from the parent's kill (fault
// campaign kill-parent:1879986325, 2,035 ms, the manager logging the killed children as
// "left"). So a process whose parent changed since this module loaded (it was reparented:
// its parent died) says no goodbye: what it leaves in flight was for processes that go down
// with it, and it leaves as a killed process does, whichever way it noticed. getppid() alone
// raced: the parent's descriptors close (the control channel ends) before the kernel reparents
// its children, so a child could exit at that end still seeing its old parent and say goodbye
// (a clean-clone run of test/sharing/manager-orphan.test.ts, once): the process bootstrap
// marks the channel's end on globalThis (programs/process-child.ts) before it exits.
const parentAtLoad = addon.getppid();
const parentGone = (): boolean => addon.getppid() !== parentAtLoad || (globalThis as Record<symbol, unknown>)[PARENT_GONE] === true;

type State = 'off' | 'connecting' | 'connected' | 'unavailable';

export class ManagerClient {
  /** Names this process (this thread) maps, with how many mappings of each. */
  #mapped = new Map<string, number>();
  /** Changes not yet sent on the current connection: true mapped, false unmapped. */
  #changes = new Map<string, boolean>();
  #state: State = 'off';
  #fd = -1;
  #poll: NativePoll | null = null;
  #outbox: Uint8Array[] = [];
  #flushQueued = false;
  #exitHooked = false;
  #gaveUpAt = 0;
  #warned = false;
  #managerPid: number | null = null;
  #readyWaiters: { resolve: (pid: number) => void; reject: (e: Error) => void }[] = [];
  #syncId = 0;
  #sent = 0;
  #refusals = 0;
  /** The pause between two connection attempts. */
  #retryTimer: NodeJS.Timeout | null = null;
  #syncs = new Map<number, { resolve: () => void; reject: (e: Error) => void }>();
  readonly #rbuf = new Uint8Array(MAX_DATAGRAM);
  readonly #rfds = new Int32Array(8);

  /** This process now maps `name` (Segment.create / Segment.openName). */
  noteMapped(name: string): void {
    const n = this.#mapped.get(name) ?? 0;
    this.#mapped.set(name, n + 1);
    if (n > 0) return;
    if (this.#state === 'connected') this.#change(name, true);
    else this.#wake();
  }

  /** This process unmapped `name` (Segment.unmap). */
  noteUnmapped(name: string): void {
    const n = this.#mapped.get(name);
    if (n === undefined) return;
    if (n > 1) {
      this.#mapped.set(name, n - 1);
      return;
    }
    this.#mapped.delete(name);
    if (this.#state === 'connected') {
      this.#change(name, false);
      this.#closeIfUnused();
    }
  }

  /**
   * Starts a manager in the background when none has a socket, without connecting: called
   * when file_system is selected, so that this process and the children it is about to start
   * find one running by their first segment, instead of starting one then, beside their work
   * (a Node process's start-up, some 40 ms of CPU, competing with the first messages). Not
   * again while one it started may still be starting; a stale socket (its manager was killed)
   * is left to the first segment, which handles that case already.
   */
  prestart(): void {
    if (this.#state !== 'off' || process.env[MANAGER_ENV] === '0' || Date.now() - this.#prestartedAt < START_TIMEOUT_MS) return;
    this.#prestartedAt = Date.now();
    // The first segment, if it comes before this manager listens, waits for it rather than
    // starting another (#connect); if it did not start, the first segment tries, and warns.
    this.#prestarted = prestartServer(managerDir());
  }
  #prestartedAt = -Infinity;
  #prestarted: Prestarted | null = null;

  /** Datagrams sent to managers so far (diagnostics, tests). */
  get messagesSent(): number {
    return this.#sent;
  }

  get state(): State {
    return this.#state;
  }
  /** The manager's pid once it has answered, else null. */
  get managerPid(): number | null {
    return this.#managerPid;
  }

  /** Connects if not connected; resolves with the manager's pid, rejects if it cannot be reached. */
  ready(): Promise<number> {
    if (this.#state === 'connected' && this.#managerPid !== null) return Promise.resolve(this.#managerPid);
    const p = new Promise<number>((resolve, reject) => this.#readyWaiters.push({ resolve, reject }));
    // Connected but not yet welcomed: the welcome is on its way.
    if (this.#state === 'off' || this.#state === 'unavailable') this.#start();
    this.#holdLoop();
    return p;
  }

  /** Resolves once the manager has handled everything this process told it so far. */
  async sync(): Promise<void> {
    // Counted before connecting: a process that maps nothing would otherwise close the
    // connection as soon as the welcome came (#closeIfUnused), and the sync would never go.
    const id = ++this.#syncId;
    const p = new Promise<void>((resolve, reject) => this.#syncs.set(id, { resolve, reject }));
    p.catch(() => {}); // a loss while connecting rejects it before it is returned
    this.#holdLoop();
    try {
      await this.ready();
    } catch (e) {
      this.#syncs.delete(id);
      this.#holdLoop();
      throw e;
    }
    this.#flush();
    this.#send({ t: 'sync', id });
    return p;
  }

  // The connection must never keep this process alive, except while someone awaits an
  // answer from the manager (ready(), sync()).
  #holdLoop(): void {
    const hold = this.#readyWaiters.length > 0 || this.#syncs.size > 0;
    if (hold) {
      this.#poll?.ref();
      this.#retryTimer?.ref();
    } else {
      this.#poll?.unref();
      this.#retryTimer?.unref();
    }
  }

  /** Nothing mapped and nobody waiting: say goodbye and close, now (synchronously). */
  #closeIfUnused(): void {
    if (this.#state !== 'connected' || this.#mapped.size > 0 || this.#readyWaiters.length > 0 || this.#syncs.size > 0) return;
    this.#flush();
    this.#goodbye();
    this.#disconnect();
    this.#state = 'off';
  }

  /** Says goodbye, unless this process's parent is gone (NOTE [No goodbye after the parent]). */
  #goodbye(): void {
    if (!parentGone()) this.#send({ t: 'bye' });
  }

  #disconnect(): void {
    this.#poll?.close();
    this.#poll = null;
    if (this.#fd >= 0) addon.close(this.#fd);
    this.#fd = -1;
    this.#outbox = [];
    this.#managerPid = null;
  }

  #change(name: string, mapped: boolean): void {
    // Mapped then unmapped within one turn: the manager need not hear of it.
    if (this.#changes.get(name) === !mapped) this.#changes.delete(name);
    else this.#changes.set(name, mapped);
    if (!this.#flushQueued) {
      this.#flushQueued = true;
      queueMicrotask(() => this.#flush());
    }
  }

  #wake(): void {
    if (this.#state === 'off' || (this.#state === 'unavailable' && Date.now() - this.#gaveUpAt >= RETRY_AFTER_MS)) this.#start();
  }

  #start(): void {
    if (process.env[MANAGER_ENV] === '0') {
      this.#giveUp(`${MANAGER_ENV}=0 turns it off`, false);
      return;
    }
    this.#state = 'connecting';
    if (!this.#exitHooked) {
      this.#exitHooked = true;
      // Registered after the allocator's own exit handler (that one is installed when the
      // sharing module loads, this one with the first segment), so by now this process has
      // let go of everything: what is left to say is the last changes, and goodbye.
      onExit(() => {
        if (this.#state !== 'connected') return;
        this.#flush();
        this.#goodbye();
      });
    }
    void this.#connect().catch((e: Error) => this.#giveUp(e.message));
  }

  async #connect(): Promise<void> {
    const pre = this.#prestarted;
    this.#prestarted = null;
    const fd = await connectOrStart(
      managerDir(),
      pre,
      (ms) =>
        new Promise<void>((resolve) => {
          this.#retryTimer = setTimeout(() => {
            this.#retryTimer = null;
            resolve();
          }, ms);
          this.#holdLoop();
        }),
    );
    if (typeof fd !== 'number') {
      this.#giveUp(fd.problem);
      return;
    }
    this.#fd = fd;
    this.#poll = new addon.Poll(fd, (status, events) => this.#onPoll(status, events));
    this.#poll.start(POLL_READABLE);
    this.#state = 'connected';
    this.#holdLoop();
    this.#changes.clear();
    this.#send({ t: 'hello', v: PROTOCOL_VERSION });
    this.#sendNames('hold', [...this.#mapped.keys()]);
    this.#closeIfUnused(); // everything was unmapped while we were connecting
  }

  #flush(): void {
    this.#flushQueued = false;
    if (this.#state !== 'connected' || this.#changes.size === 0) return;
    const hold: string[] = [];
    const drop: string[] = [];
    for (const [name, mapped] of this.#changes) (mapped ? hold : drop).push(name);
    this.#changes.clear();
    this.#sendNames('hold', hold);
    this.#sendNames('drop', drop);
  }

  #sendNames(t: 'hold' | 'drop', names: string[]): void {
    for (let i = 0; i < names.length; i += NAMES_PER_MESSAGE) this.#send({ t, names: names.slice(i, i + NAMES_PER_MESSAGE) });
  }

  #send(msg: ClientMessage): void {
    if (this.#fd < 0) return;
    const bytes = encode(msg);
    if (this.#outbox.length > 0) {
      this.#outbox.push(bytes);
      return;
    }
    this.#trySend(bytes);
  }

  #trySend(bytes: Uint8Array): boolean {
    try {
      if (addon.send(this.#fd, bytes) === EAGAIN) {
        this.#outbox.push(bytes);
        this.#poll?.start(POLL_READABLE | POLL_WRITABLE);
        return false;
      }
      this.#sent++;
      return true;
    } catch {
      this.#lost();
      return false;
    }
  }

  #onPoll(status: number, events: number): void {
    if (status < 0) return this.#lost();
    if (events & POLL_WRITABLE) {
      const queued = this.#outbox;
      this.#outbox = [];
      while (queued.length > 0 && this.#fd >= 0) {
        if (!this.#trySend(queued.shift()!)) {
          this.#outbox.push(...queued);
          return;
        }
      }
      this.#poll?.start(POLL_READABLE);
    }
    if (events & POLL_READABLE) this.#read();
  }

  #read(): void {
    while (this.#fd >= 0) {
      let n: number;
      try {
        n = addon.recv(this.#fd, this.#rbuf, this.#rfds, RECV_NO_PROBE); // the manager sends no descriptors
      } catch {
        return this.#lost();
      }
      if (n === EAGAIN) return;
      if (n < 0) return this.#lost(); // end of stream: the manager is gone
      for (let i = 1; i <= this.#rfds[0]!; i++) addon.close(this.#rfds[i]!);
      const msg = decodeManager(this.#rbuf.subarray(0, n));
      if (msg?.t === 'welcome') {
        this.#managerPid = msg.pid;
        this.#refusals = 0;
        for (const w of this.#readyWaiters.splice(0)) w.resolve(msg.pid);
      } else if (msg?.t === 'synced') {
        this.#syncs.get(msg.id)?.resolve();
        this.#syncs.delete(msg.id);
      }
      this.#holdLoop();
      this.#closeIfUnused(); // the last answer someone awaited, with nothing mapped
    }
  }

  /** The manager went away (killed, or exited while idle): reconnect, starting a new one. */
  #lost(): void {
    const welcomed = this.#managerPid !== null;
    this.#disconnect();
    this.#state = 'off';
    const err = new Error('the file_system manager went away');
    for (const s of this.#syncs.values()) s.reject(err);
    this.#syncs.clear();
    if (!welcomed && ++this.#refusals >= MAX_REFUSALS) {
      this.#refusals = 0;
      this.#giveUp(`the manager on ${socketPath(managerDir())} closes every connection before answering`);
      return;
    }
    // What this process maps is sent again, in full, to the next manager.
    if (this.#mapped.size > 0 || this.#readyWaiters.length > 0) this.#start();
  }

  #giveUp(reason: string, warn = true): void {
    this.#state = 'unavailable';
    this.#gaveUpAt = Date.now();
    const err = new ManagerUnavailableError(
      `The tensorproc file_system manager is not available: ${reason}. Named segments still work, ` +
        'but those held by a process that gets killed will stay in /dev/shm (remove them with `npx tensorproc shm clean`).',
    );
    for (const w of this.#readyWaiters.splice(0)) w.reject(err);
    if (warn && !this.#warned) {
      this.#warned = true;
      process.emitWarning(err);
    }
  }
}

/** The one client of this process (this thread). */
export const managerClient = new ManagerClient();
