// The file_system manager: one background process per user (like PyTorch's
// torch_shm_manager) that removes the names of segments whose users have all died.
// Started by the client (sharing/manager/manager-start.ts) as `node programs/manager.js <dir>`;
// exits on its own when idle. It runs apart from the library's users: nothing here is
// imported by the layers below (they speak to it through sharing/manager/protocol.ts).
//
// NOTE [The file_system manager]
// A named segment (/dev/shm/tensorproc_<pid>_<random>) is removed by whoever drops its last
// reference (NOTE [Segment lifetime]). A process killed while holding references drops
// nothing, so without help the name would stay until reboot. The manager is that help:
//  - Who talks to it: every process that maps a named segment connects once (lazily, with
//    its first one) to a SOCK_SEQPACKET socket in a 0700 directory (dir.ts), and tells it
//    which names it maps and unmaps (client.ts; once per mapping, never per message). The
//    manager refuses a peer whose uid (SO_PEERCRED, recorded by the kernel) is not its own.
//  - How it learns of a death: a pidfd per client process, polled by the event loop; it
//    polls readable when the process exits, however it exits, and names that one process
//    (no confusion with a later process given the same pid).
//  - What it does then, for each name the dead process registered (and each name it created,
//    found in /dev/shm by the pid in the name, in case it was killed before registering):
//    takes back what the process held, exactly, from its slot in the header (NOTE
//    [Reference slots]); removes the name if the total is then zero; and if live processes
//    still hold it (a non-zero slot of a running pid), follows them too, registered or not.
//  - References in flight (a message carrying the segment, not yet received) are in the
//    total but in nobody's slot. When no live process holds a name and only those are left:
//      * if a holder died holding references, or closed its connection without goodbye (it
//        was killed), the messages are probably lost with it: a receiver still has
//        CRASH_GRACE_MS (1 s) to take them, then the name goes. A receiver too late gets
//        ERR_TP_SEGMENT_GONE;
//      * if every holder let go on purpose (a producer that put and exited), the messages
//        are meant to be received: the name stays for at least CLEAN_GRACE_MS (2 s), and
//        after that while any *user* lives (a process that has connected: it may be the
//        receiver), and goes with the last one. A receiver that never used named segments
//        itself is only covered by the 2 s. (A queue closed with unread messages should
//        release them; if nobody does, they wait for the last user.) When that last user
//        is killed (a parent and its pipeline SIGKILLed), the messages were most likely in
//        its queues: they get CRASH_GRACE_MS from its death, so that every name of a
//        killed pipeline is gone within about a second, not the clean grace after it.
//  - Starting: the first process that finds no manager starts one, detached. Two may start
//    at once: an flock on manager.lock decides, the loser exits, and clients retry connecting
//    until the winner listens. The winner removes a dead manager's socket file before
//    binding. A manager that was killed is simply started again by the next client that
//    needs it; clients reconnect by themselves and register again everything they map. At
//    start it also sweeps /dev/shm for this user's names whose creator is dead (processes
//    that died while no manager ran), judging each by its slots like any other.
//  - Stopping: when no user is alive, no name is pending and nobody is followed, for
//    IDLE_MS (10 s, TENSORPROC_MANAGER_IDLE_MS), it removes its socket and exits. (A user
//    is followed by its pidfd until it dies, connected or not: a client's connection is
//    open only while it maps named segments.)
//  - If it cannot be started, clients warn once (ERR_TP_MANAGER_UNAVAILABLE) and go on:
//    segments work, only cleanup after crashes is lost. TENSORPROC_MANAGER=0 turns it off
//    (no warning); TENSORPROC_MANAGER_DIR picks the directory (tests use their own);
//    TENSORPROC_MANAGER_LOG names a file it appends what it removes, and why, to.
import { appendFileSync, chmodSync, openSync, unlinkSync } from 'node:fs';
import { debugEnabled } from '../debug.js';
import { addon, EAGAIN, POLL_READABLE, RECV_NO_PROBE, type NativePoll } from '../native/index.js';
import { checkDir, lockPath, managerDir, managerLog, socketPath } from '../sharing/manager/dir.js';
import { decodeClient, encode, MAX_DATAGRAM, PROTOCOL_VERSION, type ManagerMessage } from '../sharing/manager/protocol.js';
import { Registry } from './registry.js';
import { sweepNames } from '../sharing/manager/names-dir.js';
import { ENV, envNumber, envString } from '../env.js';

const IDLE_MS = envNumber('TENSORPROC_MANAGER_IDLE_MS') ?? ENV.TENSORPROC_MANAGER_IDLE_MS.default;
const LOG = envString('TENSORPROC_MANAGER_LOG');
const ACCEPT_PAUSE_MS = 100;

interface Conn {
  readonly fd: number;
  readonly pid: number;
  readonly poll: NativePoll;
  bye: boolean;
}

function log(line: string): void {
  // A detached manager's stderr goes nowhere: under NODE_DEBUG=tensorproc its lines (sweeps,
  // removals) go to manager.log in its directory, which the starting client names (client.ts).
  const file = LOG || (debugEnabled ? managerLog(dir) : undefined);
  if (file) {
    try {
      appendFileSync(file, `${new Date().toISOString()} manager ${process.pid}: ${line}\n`);
    } catch {
      // logging is best effort
    }
  }
}

class Manager {
  readonly #dir: string;
  readonly #uid = process.getuid!();
  readonly #conns = new Map<number, Conn>();
  // A user's death may leave named objects' entries behind (NOTE [Named objects] in
  // src/transport/names/claim.ts): they are swept then, and at start.
  readonly #registry = new Registry(
    log,
    () => this.#checkIdle(),
    () => this.#sweepNames(),
  );
  readonly #buf = new Uint8Array(MAX_DATAGRAM);
  readonly #fds = new Int32Array(254);
  #listenFd = -1;
  #listenPoll: NativePoll | null = null;
  #idleTimer: NodeJS.Timeout | null = null;

  constructor(dir: string) {
    this.#dir = dir;
  }

  /** False when another manager already runs for this directory. */
  start(): boolean {
    addon.raiseFileLimit();
    // Held until this process dies (the descriptor is never closed): the kernel drops it then.
    const lockFd = openSync(lockPath(this.#dir), 'w', 0o600);
    if (!addon.tryLock(lockFd)) return false;
    const path = socketPath(this.#dir);
    try {
      unlinkSync(path); // a dead manager's socket: nobody listens on it
    } catch {
      // none
    }
    this.#listenFd = addon.unixListen(path, 512);
    chmodSync(path, 0o600);
    this.#listenPoll = new addon.Poll(this.#listenFd, () => this.#accept());
    this.#listenPoll.start(POLL_READABLE);
    log(`listening on ${path}`);
    this.#registry.sweep();
    this.#sweepNames();
    this.#checkIdle();
    return true;
  }

  #sweepNames(): void {
    try {
      const gone = sweepNames(this.#dir);
      if (gone.length > 0) log(`removed ${gone.length} name(s) whose creator died: ${gone.join(' ')}`);
    } catch (e) {
      log(`sweeping names: ${(e as Error).message}`);
    }
  }

  #accept(): number {
    let accepted = 0;
    for (;;) {
      let fd: number;
      try {
        fd = addon.accept(this.#listenFd);
      } catch (e) {
        // Out of descriptors (a manager started by a process under a low `ulimit -n`
        // inherits it): the socket would poll readable forever. Pause; clients wait in the
        // backlog, and users are then followed by polling instead of pidfds.
        log(`accept: ${(e as Error).message}`);
        this.#registry.shedPidfds();
        this.#listenPoll?.stop();
        setTimeout(() => this.#listenPoll?.start(POLL_READABLE), ACCEPT_PAUSE_MS);
        return accepted;
      }
      if (fd === EAGAIN) return accepted;
      accepted++;
      let pid: number, uid: number;
      try {
        [pid, uid] = addon.peerCredentials(fd);
      } catch {
        addon.close(fd);
        continue;
      }
      if (uid !== this.#uid) {
        log(`refused pid ${pid}: uid ${uid} is not ${this.#uid}`);
        addon.close(fd);
        continue;
      }
      if (!this.#registry.connected(pid)) {
        addon.close(fd);
        continue;
      }
      const conn: Conn = { fd, pid, poll: new addon.Poll(fd, (status) => this.#read(conn, status)), bye: false };
      this.#conns.set(fd, conn);
      conn.poll.start(POLL_READABLE);
      this.#checkIdle();
    }
  }

  #read(conn: Conn, status: number): void {
    if (status < 0) return this.#close(conn);
    while (this.#conns.has(conn.fd)) {
      let n: number;
      try {
        n = addon.recv(conn.fd, this.#buf, this.#fds, RECV_NO_PROBE); // clients send no descriptors
      } catch {
        return this.#close(conn);
      }
      if (n === EAGAIN) return;
      if (n < 0) return this.#close(conn);
      if (this.#fds[0]! > 0) {
        for (let i = 1; i <= this.#fds[0]!; i++) addon.close(this.#fds[i]!);
        return this.#close(conn); // clients never send descriptors
      }
      const msg = decodeClient(this.#buf.subarray(0, n));
      if (msg === null) {
        log(`pid ${conn.pid} sent a malformed message; dropping its connection`);
        return this.#close(conn);
      }
      try {
        switch (msg.t) {
          case 'hello':
            if (msg.v !== PROTOCOL_VERSION) return this.#close(conn);
            this.#send(conn, { t: 'welcome', v: PROTOCOL_VERSION, pid: process.pid });
            break;
          case 'hold':
            this.#registry.hold(conn.pid, msg.names);
            break;
          case 'drop':
            this.#registry.drop(conn.pid, msg.names);
            break;
          case 'sync':
            this.#send(conn, { t: 'synced', id: msg.id });
            break;
          case 'bye':
            conn.bye = true;
            break;
        }
      } catch (e) {
        log(`handling ${msg.t} from pid ${conn.pid}: ${(e as Error).stack}`);
      }
    }
  }

  #send(conn: Conn, msg: ManagerMessage): void {
    try {
      addon.send(conn.fd, encode(msg)); // tiny answers: a client that does not read loses them
    } catch {
      this.#close(conn);
    }
  }

  #close(conn: Conn): void {
    if (!this.#conns.delete(conn.fd)) return;
    conn.poll.close();
    addon.close(conn.fd);
    this.#registry.disconnected(conn.pid, conn.bye);
  }

  #checkIdle(): void {
    const idle = this.#conns.size === 0 && this.#registry.idle;
    if (!idle) {
      if (this.#idleTimer !== null) clearTimeout(this.#idleTimer);
      this.#idleTimer = null;
    } else if (this.#idleTimer === null) {
      this.#idleTimer = setTimeout(() => this.#stopIfIdle(), IDLE_MS);
    }
  }

  #stopIfIdle(): void {
    this.#idleTimer = null;
    // A client may be waiting in the backlog: take it first, and stay if there was one.
    if (this.#accept() > 0 || this.#conns.size > 0 || !this.#registry.idle) return this.#checkIdle();
    try {
      unlinkSync(socketPath(this.#dir));
    } catch {
      // removed by hand
    }
    log('idle: exiting');
    process.exit(0);
  }
}

/** The directory this manager serves, set by managerMain(). */
let dir = '';

/** The daemon's main: src/programs/manager.ts runs it as `node manager.js <dir>`. */
export function managerMain(argv: readonly string[]): void {
  dir = argv[2] ?? managerDir();
  const problem = checkDir(dir);
  if (problem !== null) {
    log(problem);
    process.exit(1);
  }
  process.on('uncaughtException', (e) => log(`uncaught: ${e.stack}`));
  if (!new Manager(dir).start()) {
    log('another manager runs here');
    process.exit(0);
  }
}
