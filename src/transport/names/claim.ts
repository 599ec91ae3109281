// A name's creator side: the listening socket of a named object, answering attach requests.
//
// NOTE [Named objects]
// `new mp.Queue({ name })` (and the other kinds) makes an object reachable from any process
// of the same user, including programs this one did not start: `await mp.attach(name)`
// returns the same object there, exactly as if it had arrived in spawn arguments or a message.
//  - The registry is a folder, <manager dir>/names-v1/ (sharing/manager/names-dir.ts): the
//    manager dir is this user's alone (mode 0700, owned by the uid: dir.ts), so another user
//    can neither reach the sockets nor list the names. Each name is a listening AF_UNIX
//    SOCK_SEQPACKET socket, `<name>.sock`, bound by the creating process: bind() refusing an
//    existing path is what makes names unique per user across kinds (ERR_TP_NAME_TAKEN). An
//    entry nobody listens on any more (its creator was killed: the kernel closed the socket
//    but left the file) is stale: it is replaced by the next creator of that name, removed by
//    an attacher that finds it, and swept by the file_system manager, which follows every
//    creator (a creator connects to it once, as a user: client.ts) and, when a user dies, and
//    at its own start, removes every stale entry (names-dir.ts sweepNames).
//  - Attaching (attach.ts, the datagrams in exchange.ts): connect; check the listener's uid
//    (SO_PEERCRED); send {"t":"attach"}; the creator checks the attacher's uid the same way
//    (kernel credentials, not claims), reduces the object as a message would (NOTE [Message
//    table]), sends that table as JSON with its descriptors (SCM_RIGHTS), and closes. The
//    attacher rebuilds it with the reductions a child uses for its arguments, so everything
//    that holds for a queue received in a message holds for an attached one: the same socket,
//    shared state and slots (maxsize, exactly-once), the same robustness to killed peers; and a
//    process that attaches to an object it already has gets that very object (NOTE [Queue
//    objects and descriptors]).
//  - Lifetime: the name lives while its creator holds the object. close() of the object in
//    the creator (for a Pipe, of the creator's end) gives the name up (unlinks the entry,
//    closes the socket); so does the creator's exit; a kill leaves a stale entry, removed as
//    above. The claim keeps the object alive (it must be able to send it), so a named object
//    dropped without close() keeps its name until its creator exits. Attached copies are not
//    creators: closing them, or their processes dying, changes nothing for the name.
//  - Serving costs nothing until someone attaches: the listening socket is polled by the
//    event loop, unref'd (a name never keeps its process alive).
import { chmodSync, lstatSync, unlinkSync } from 'node:fs';
import { addon, EAGAIN, POLL_READABLE, RECV_NO_PROBE, systemError, type NativePoll } from '../../native/index.js';
import { InvalidArgumentError, NameForbiddenError, NameTakenError } from '../../errors.js';
import { describeValue } from '../../describe-value.js';
import { onExit } from '../../exit-hooks.js';
import { entryPath, fitsSocket, NAME_SYNTAX, openNamesDir, removeIfStale, withNamesLock } from '../../sharing/manager/names-dir.js';
import { managerClient } from '../../sharing/manager/client.js';
import { closeReceived, decodeRequest, encodeJson, EXCHANGE_VERSION, MAX_EXCHANGE, reduceForReply, type Reply } from './exchange.js';

/** An attacher that connected and asks nothing for this long is dropped. */
const REQUEST_TIMEOUT_MS = 10_000;

/** Checks a user's name (a `name` option, an attach argument); `what` names the call. */
export function checkName(name: unknown, what: string): string {
  if (typeof name !== 'string' || !NAME_SYNTAX.test(name)) {
    throw new InvalidArgumentError(
      `${what}: a name is 1 to 64 letters, digits, '_', '-' or '.', starting with a letter or digit (got ${describeValue(name)}).`,
    );
  }
  return name;
}

/** The `name` of an options object, checked; null when it has none. */
export function nameOption(options: unknown, what: string): string | null {
  if (options === null || typeof options !== 'object') return null;
  let name: unknown;
  try {
    name = (options as { name?: unknown }).name;
  } catch (e) {
    throw new InvalidArgumentError(`${what} could not read its options' name (${(e as Error)?.message ?? String(e)}).`, { cause: e });
  }
  return name === undefined ? null : checkName(name, what);
}

interface Conn {
  readonly fd: number;
  readonly poll: NativePoll;
  readonly timer: NodeJS.Timeout;
}

const claims = new Set<NameClaim>();
const byObject = new WeakMap<object, NameClaim>();
let exitHooked = false;
const rbuf = new Uint8Array(MAX_EXCHANGE);
const rfds = new Int32Array(254); // SCM_MAX_FD + the count: whatever comes is read, then closed

/** One name held by this process: its listening socket, and the object it hands out. */
export class NameClaim {
  readonly name: string;
  readonly path: string;
  readonly #fd: number;
  readonly #ino: number;
  readonly #poll: NativePoll;
  readonly #conns = new Set<Conn>();
  #target: object | null = null;
  #closed = false;

  private constructor(name: string, path: string, fd: number) {
    this.name = name;
    this.path = path;
    this.#fd = fd;
    let ino = -1;
    try {
      chmodSync(path, 0o600);
      ino = lstatSync(path).ino;
    } catch {
      // removed by hand at once: close() then leaves the path alone
    }
    this.#ino = ino;
    this.#poll = new addon.Poll(fd, (status) => (status < 0 ? undefined : this.#accept()));
    this.#poll.start(POLL_READABLE);
    this.#poll.unref();
  }

  /**
   * Takes `name` for an object about to be made (`what`: the call, for messages): binds its
   * socket, so that a name in use is refused before anything is allocated. The caller then
   * serve()s the object, or close()s the claim if making it failed.
   */
  static take(name: string, what: string): NameClaim {
    const opened = openNamesDir();
    if ('problem' in opened) {
      throw new NameForbiddenError(
        `${what}: the registry of names cannot be used: ${opened.problem}. Point TENSORPROC_MANAGER_DIR at a directory of yours with mode 700.`,
      );
    }
    const path = entryPath(opened.dir, name);
    if (!fitsSocket(path)) {
      throw new InvalidArgumentError(
        `${what}: the socket path of name '${name}' (${path}) is too long for a Unix socket: use a shorter name or TENSORPROC_MANAGER_DIR.`,
      );
    }
    let fd = listen(path);
    if (fd === null) {
      // Taken, or left by a creator that died: replace it only if nobody listens there.
      fd = withNamesLock(opened.dir, () => (removeIfStale(path) ? listen(path) : null));
      if (fd === null) {
        throw new NameTakenError(
          `${what}: the name '${name}' is already in use by a live object of this user: pick another name, or mp.attach('${name}') to it.`,
        );
      }
    }
    const claim = new NameClaim(name, path, fd);
    claims.add(claim);
    if (!exitHooked) {
      exitHooked = true;
      onExit(() => {
        for (const c of [...claims]) c.close();
      });
    }
    // Connecting once makes the manager follow this process, whose death then sweeps its names.
    managerClient.ready().catch(() => {});
    return claim;
  }

  /** From now on, attach requests get `target` (for a Pipe, the other end); `owner`.close() gives the name up. */
  serve(owner: object, target: object = owner): void {
    this.#target = target;
    byObject.set(owner, this);
  }

  get closed(): boolean {
    return this.#closed;
  }

  /** Gives the name up: the entry goes, attach requests under way are dropped. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    claims.delete(this);
    this.#target = null;
    try {
      // Only our own entry: one removed by hand and made again by another process is not ours.
      if (this.#ino !== -1 && lstatSync(this.path, { throwIfNoEntry: false })?.ino === this.#ino) unlinkSync(this.path);
    } catch {
      // removed meanwhile
    }
    this.#poll.close();
    addon.close(this.#fd);
    for (const c of [...this.#conns]) this.#drop(c);
  }

  #accept(): void {
    while (!this.#closed) {
      let fd: number;
      try {
        fd = addon.accept(this.#fd);
      } catch {
        return; // out of descriptors: the attacher waits in the backlog, and times out
      }
      if (fd === EAGAIN) return;
      let uid: number;
      try {
        uid = addon.peerCredentials(fd)[1];
      } catch {
        addon.close(fd);
        continue;
      }
      if (uid !== process.getuid!()) {
        // Kernel credentials: another user (root included) gets nothing of ours.
        this.#answer(fd, {
          t: 'error',
          v: EXCHANGE_VERSION,
          code: 'ERR_TP_NAME_FORBIDDEN',
          message: `The name '${this.name}' belongs to uid ${process.getuid!()}; only that user may attach to it.`,
        });
        addon.close(fd);
        continue;
      }
      const conn: Conn = {
        fd,
        poll: new addon.Poll(fd, (status) => (status < 0 ? this.#drop(conn) : this.#read(conn))),
        timer: setTimeout(() => this.#drop(conn), REQUEST_TIMEOUT_MS).unref(),
      };
      this.#conns.add(conn);
      conn.poll.start(POLL_READABLE);
      conn.poll.unref();
    }
  }

  #read(conn: Conn): void {
    let n: number;
    try {
      n = addon.recv(conn.fd, rbuf, rfds, RECV_NO_PROBE); // attachers send no descriptors
    } catch {
      return this.#drop(conn);
    }
    if (n === EAGAIN) return;
    if (n < 0) return this.#drop(conn); // gone: a liveness probe (names-dir.ts), or an attacher that gave up
    if (rfds[0]! > 0) {
      closeReceived(rfds);
      return this.#drop(conn); // not an attacher
    }
    const req = decodeRequest(rbuf.subarray(0, n));
    if (req === null) return this.#drop(conn);
    if (req.v !== EXCHANGE_VERSION) {
      this.#answer(conn.fd, {
        t: 'error',
        v: EXCHANGE_VERSION,
        code: 'ERR_TP_BAD_FRAME',
        message: `The attach exchange of version ${req.v} is not spoken here (version ${EXCHANGE_VERSION}): use the same tensorproc release on both sides.`,
      });
      return this.#drop(conn);
    }
    this.#reply(conn);
    this.#drop(conn);
  }

  #reply(conn: Conn): void {
    const target = this.#target;
    if (target === null) {
      this.#answer(conn.fd, {
        t: 'error',
        v: EXCHANGE_VERSION,
        code: 'ERR_TP_NAME_NOT_FOUND',
        message: `The name '${this.name}' was given up.`,
      });
      return;
    }
    let reduced: ReturnType<typeof reduceForReply>;
    try {
      reduced = reduceForReply(target);
    } catch (e) {
      const err = e as { code?: unknown; message?: unknown };
      this.#answer(conn.fd, {
        t: 'error',
        v: EXCHANGE_VERSION,
        code: typeof err.code === 'string' ? err.code : 'ERR_TP_NAME_NOT_FOUND',
        message: `The object named '${this.name}' cannot be sent: ${String(err.message)}`,
      });
      return;
    }
    let sent = false;
    try {
      // A fresh connection's buffer holds a small datagram: EAGAIN here means it is not ours to wait for.
      sent = addon.send(conn.fd, reduced.bytes, reduced.fds) !== EAGAIN;
    } catch {
      // the attacher went away
    }
    if (!sent) reduced.abandon();
  }

  #answer(fd: number, reply: Reply): void {
    try {
      addon.send(fd, encodeJson(reply));
    } catch {
      // the attacher went away
    }
  }

  #drop(conn: Conn): void {
    if (!this.#conns.delete(conn)) return;
    clearTimeout(conn.timer);
    conn.poll.close();
    addon.close(conn.fd);
  }
}

/** bind + listen at `path`; null when the path exists. */
function listen(path: string): number | null {
  try {
    return addon.unixListen(path, 64);
  } catch (e) {
    if ((e as { code?: string }).code === 'EADDRINUSE') return null;
    throw systemError(e, `making the name socket ${path}`);
  }
}

/**
 * For a constructor with a `name` option: the claim taken before anything is made (null
 * without a name), so that a name in use costs nothing.
 */
export function claimName(options: unknown, what: string): NameClaim | null {
  const name = nameOption(options, what);
  return name === null ? null : NameClaim.take(name, what);
}

/** close() of a named object in its creator: gives up its name (nothing for other objects). */
export function releaseName(owner: object): void {
  const claim = byObject.get(owner);
  if (claim === undefined) return;
  byObject.delete(owner);
  claim.close();
}

/** The name `owner` holds in this process, or null. */
export function nameOf(owner: object): string | null {
  const claim = byObject.get(owner);
  return claim === undefined || claim.closed ? null : claim.name;
}
