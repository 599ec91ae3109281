// mp.attach(name): the attaching side of NOTE [Named objects] (claim.ts). Looks the name up
// in this user's registry, asks its creator for the object, and rebuilds it as a child would
// rebuild its arguments.
import { addon, EAGAIN, POLL_READABLE, systemError } from '../../native/index.js';
import { InvalidArgumentError, NameForbiddenError, NameNotFoundError } from '../../errors.js';
import { describeValue } from '../../describe-value.js';
import { entryPath, fitsSocket, openNamesDir, removeIfStale, withNamesLock } from '../../sharing/manager/names-dir.js';
import { checkTimeout } from '../timeouts.js';
import { MAX_FDS } from '../wire.js';
import { checkName } from './claim.js';
import { decodeReply, encodeJson, EXCHANGE_VERSION, MAX_EXCHANGE, rebuildReply, type Reply } from './exchange.js';

export interface AttachOptions {
  /** Milliseconds to wait for the name to appear (default 5000; 0: look once; Infinity: no limit). */
  timeout?: number;
}

const DEFAULT_TIMEOUT_MS = 5000;
/** A creator that accepted the connection gets at least this long to answer, even past the timeout. */
const ANSWER_MS = 2000;
/** Looks for the name again after this long at first, backing off to LOOK_MAX_MS. */
const LOOK_MIN_MS = 5;
const LOOK_MAX_MS = 100;

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

function timeoutOf(options: unknown): number | null {
  if (options === undefined || options === null) return DEFAULT_TIMEOUT_MS;
  if (typeof options !== 'object')
    throw new InvalidArgumentError(`mp.attach(name, options) takes { timeout } (got ${describeValue(options)}).`);
  const t = (options as AttachOptions).timeout;
  return t === undefined ? DEFAULT_TIMEOUT_MS : checkTimeout(t);
}

/**
 * The object named `name` by a process of this user (NOTE [Named objects]): a Queue,
 * SimpleQueue, JoinableQueue, Event, Lock, RLock, Semaphore, Value, Array, or the other end
 * of a named Pipe. Waits up to `timeout` ms for the name to appear.
 */
export async function attach<T = unknown>(name: string, options?: AttachOptions): Promise<T> {
  checkName(name, 'mp.attach()');
  const timeout = timeoutOf(options);
  const opened = openNamesDir();
  if ('problem' in opened) {
    throw new NameForbiddenError(
      `mp.attach('${name}'): the registry of names cannot be used: ${opened.problem}. Only the user who made a name can attach to it; point TENSORPROC_MANAGER_DIR at a directory of yours with mode 700.`,
    );
  }
  const path = entryPath(opened.dir, name);
  if (!fitsSocket(path)) throw new InvalidArgumentError(`mp.attach('${name}'): the socket path ${path} is too long for a Unix socket.`);
  const deadline = timeout === null ? Infinity : Date.now() + timeout;
  let pause = LOOK_MIN_MS;
  let last = 'nothing of that name exists';
  for (;;) {
    const fd = connect(path, name, opened.dir);
    if (fd !== null) {
      const got = await ask(fd, name, deadline);
      if (got.t === 'object') return got.obj as T;
      last = got.why;
    }
    const left = deadline - Date.now();
    if (left <= 0) {
      throw new NameNotFoundError(
        `mp.attach('${name}'): no object of that name answered within ${timeout} ms (${last}). Make it first (new mp.Queue({ name: '${name}' }), say), in a process of this user that is still running.`,
      );
    }
    await sleep(Math.min(pause, left));
    pause = Math.min(pause * 2, LOOK_MAX_MS);
  }
}

/** A connection to the name's socket; null when nobody listens there (yet, or any more). */
function connect(path: string, name: string, dir: string): number | null {
  let fd: number;
  try {
    fd = addon.unixConnect(path);
  } catch (e) {
    const code = (e as { code?: string }).code;
    if (code === 'ENOENT' || code === 'EAGAIN') return null; // not there yet; or its backlog is full
    if (code === 'ECONNREFUSED') {
      withNamesLock(dir, () => removeIfStale(path)); // its creator died: the entry goes
      return null;
    }
    if (code === 'EACCES' || code === 'EPERM') {
      throw new NameForbiddenError(`mp.attach('${name}'): ${path} cannot be reached (${code}): it is not this user's.`);
    }
    throw systemError(e, `attaching to the name '${name}'`);
  }
  let uid: number;
  try {
    uid = addon.peerCredentials(fd)[1];
  } catch (e) {
    addon.close(fd);
    throw systemError(e, `attaching to the name '${name}'`);
  }
  if (uid !== process.getuid!()) {
    addon.close(fd);
    throw new NameForbiddenError(`mp.attach('${name}'): the name is held by uid ${uid}, not by this user (${process.getuid!()}).`);
  }
  return fd;
}

type Answer = { t: 'object'; obj: object } | { t: 'retry'; why: string };

/** Sends the request on `fd` and waits for the reply; closes `fd` whatever happens. */
async function ask(fd: number, name: string, deadline: number): Promise<Answer> {
  try {
    try {
      addon.send(fd, encodeJson({ t: 'attach', v: EXCHANGE_VERSION, name }));
    } catch {
      return { t: 'retry', why: 'its creator closed the connection' };
    }
    const reply = await receive(fd, Math.max(deadline - Date.now(), ANSWER_MS));
    if (reply === null) return { t: 'retry', why: 'its creator gave it up, or did not answer' };
    const [bytes, fds] = reply;
    const msg = decodeReply(bytes);
    if (msg === null || msg.v !== EXCHANGE_VERSION) {
      closeAll(fds);
      throw new NameNotFoundError(
        `mp.attach('${name}'): its creator answered in a way this tensorproc does not understand (another release?).`,
      );
    }
    if (msg.t === 'error') {
      closeAll(fds);
      return replyError(msg, name);
    }
    return { t: 'object', obj: rebuildReply(msg, fds) };
  } finally {
    addon.close(fd);
  }
}

function replyError(msg: Extract<Reply, { t: 'error' }>, name: string): Answer {
  if (msg.code === 'ERR_TP_NAME_FORBIDDEN') throw new NameForbiddenError(`mp.attach('${name}'): ${msg.message}`);
  if (msg.code === 'ERR_TP_NAME_NOT_FOUND') return { t: 'retry', why: msg.message };
  throw new NameNotFoundError(`mp.attach('${name}'): its creator could not send it (${msg.code}: ${msg.message}).`);
}

function closeAll(fds: number[]): void {
  for (const f of fds) {
    try {
      addon.close(f);
    } catch {
      // closed already
    }
  }
}

const rbuf = new Uint8Array(MAX_EXCHANGE);
const rfds = new Int32Array(MAX_FDS + 1);

/** The reply datagram and its descriptors; null at the end of the stream or after `ms`. */
function receive(fd: number, ms: number): Promise<[Uint8Array, number[]] | null> {
  return new Promise((resolve, reject) => {
    const poll = new addon.Poll(fd, (status) => {
      if (done) return;
      if (status < 0) return finish(null);
      let n: number;
      try {
        n = addon.recv(fd, rbuf, rfds);
      } catch (e) {
        return fail(systemError(e, 'receiving a named object'));
      }
      if (n === EAGAIN) return;
      if (n < 0) return finish(null);
      const fds = Array.from(rfds.subarray(1, 1 + rfds[0]!));
      finish([rbuf.slice(0, n), fds]);
    });
    const timer = ms === Infinity ? null : setTimeout(() => finish(null), ms);
    let done = false;
    const stop = (): void => {
      done = true;
      if (timer !== null) clearTimeout(timer);
      poll.close();
    };
    const finish = (v: [Uint8Array, number[]] | null): void => {
      stop();
      resolve(v);
    };
    const fail = (e: Error): void => {
      stop();
      reject(e);
    };
    poll.start(POLL_READABLE);
  });
}
