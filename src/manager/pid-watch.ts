// How the manager learns that a process exited (NOTE [The file_system manager], server.ts): a
// pidfd per process, polled by the event loop, which polls readable when the process exits
// however it exits and names that one process (no confusion with a later one given the same
// pid); where pidfds are missing (Linux before 5.3) or were given up (out of descriptors),
// kill(pid, 0) at a steady pace instead. The registry (registry.ts) decides what an exit means.
import { addon, POLL_READABLE, type NativePoll } from '../native/index.js';
import { isAlive } from '../sharing/liveness.js';

/** Liveness is polled at this pace where pidfds are missing. */
const POLL_PIDS_MS = 50;

interface Watched {
  /** A pidfd that polls readable when the process exits, or -1 (polled instead). */
  pidfd: number;
  poll: NativePoll | null;
}

export class PidWatch {
  readonly #watched = new Map<number, Watched>();
  readonly #onExit: (pid: number) => void;
  #timer: NodeJS.Timeout | null = null;

  /** `onExit(pid)` is called once a watched process has exited, and may be called again until it is forgotten. */
  constructor(onExit: (pid: number) => void) {
    this.#onExit = onExit;
  }

  /** Follows `pid` (again: a no-op). False if it is gone already: no exit of it will be reported. */
  watch(pid: number): boolean {
    if (this.#watched.has(pid)) return true;
    let pidfd = -1;
    let poll: NativePoll | null = null;
    try {
      pidfd = addon.pidfdOpen(pid);
      poll = new addon.Poll(pidfd, () => this.#onExit(pid));
      poll.start(POLL_READABLE);
    } catch (e) {
      if (pidfd >= 0) addon.close(pidfd);
      pidfd = -1;
      poll = null;
      if ((e as { code?: string }).code === 'ESRCH') return false;
      if (!isAlive(pid)) return false;
      this.#startPolling();
    }
    this.#watched.set(pid, { pidfd, poll });
    return true;
  }

  /**
   * Stops the pidfd's poll of a process that has exited: a dead process's pidfd stays
   * readable and would report it again and again. Its pidfd stays open until forget().
   */
  quiet(pid: number): void {
    const w = this.#watched.get(pid);
    w?.poll?.close();
    if (w !== undefined) w.poll = null;
  }

  /** No longer follows `pid`, and closes its pidfd. */
  forget(pid: number): void {
    const w = this.#watched.get(pid);
    if (w === undefined) return;
    this.#watched.delete(pid);
    w.poll?.close();
    if (w.pidfd >= 0) addon.close(w.pidfd);
  }

  /** Out of descriptors: follow every process by polling instead, freeing its pidfd. */
  shed(): void {
    for (const w of this.#watched.values()) {
      if (w.pidfd < 0) continue;
      w.poll?.close();
      addon.close(w.pidfd);
      w.pidfd = -1;
      w.poll = null;
    }
    this.#startPolling();
  }

  #startPolling(): void {
    this.#timer ??= setInterval(() => this.#pollPids(), POLL_PIDS_MS);
  }

  #pollPids(): void {
    let polled = 0;
    for (const [pid, w] of [...this.#watched]) {
      if (w.pidfd >= 0) continue;
      polled++;
      if (!isAlive(pid)) this.#onExit(pid);
    }
    if (polled === 0 && this.#timer !== null) {
      clearInterval(this.#timer);
      this.#timer = null;
    }
  }
}
