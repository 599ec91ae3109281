// Queue: torch.multiprocessing.Queue for tensors. Many producers and many consumers in any
// processes and threads; `maxsize` backpressure (NOTE [Queue slots]); messages as in NOTE
// [Frames]; descriptors as in NOTE [Queue objects and descriptors].
import { addon, systemError } from '../native/index.js';
import { InvalidArgumentError, QueueEmptyError, QueueFullError } from '../errors.js';
import { describeValue } from '../describe-value.js';
import { Endpoint, checkMessage, registerReduction, settled, timeoutOption, type Frame, type Reduction } from '../transport/index.js';
import { SharedWords } from './shared-words.js';
import { registerWaitable } from './waitable.js';
import { COUNT, Slots } from './slots.js';
import { GetSpin, PutSpin } from './spin.js';
import { checkState, closeAll, remember, identityKey, reuseOrAdopt, track, untrack } from './lifetime.js';
import { checkArgCount, extraArgumentsError } from '../arguments.js';
import { claimName, releaseName, type NameClaim } from '../transport/names/index.js';

export interface QueueOptions {
  /** At most this many messages in the queue; 0, negative or absent: no limit (as torch). */
  maxsize?: number;
  /** Reachable by this name from any process of this user: `mp.attach(name)` (NOTE [Named objects]). */
  name?: string;
}

export interface TimeoutOptions {
  /** Milliseconds; absent: wait as long as it takes. 0: do not wait. */
  timeout?: number;
}

/** Why a get with a timeout gave up (made only when one does). */
const emptyError = (timeout: number): Error =>
  new QueueEmptyError(timeout === 0 ? 'The queue is empty.' : `Nothing arrived on the queue within ${timeout} ms.`);

/** What a Queue holds; closing it frees the descriptors (see lifetime.ts). */
class QueueCore {
  readonly endpoint: Endpoint;
  readonly state: SharedWords;
  readonly slots: Slots;
  readonly spin: GetSpin;
  readonly putSpin: PutSpin;
  readonly key: string;

  constructor(sendFd: number, recvFd: number, state: SharedWords, maxsize: number, key: string) {
    this.state = state;
    this.key = key;
    this.endpoint = new Endpoint(sendFd, recvFd, {
      what: 'queue',
      onDatagram: () => this.slots.taken(),
      onDropped: () => this.slots.giveBack(), // a message that will never arrive frees its slot
    });
    this.slots = new Slots(state, this.endpoint, maxsize);
    this.spin = new GetSpin(state.words, state.mapping);
    this.putSpin = new PutSpin(state.mapping);
  }

  /**
   * Encodes `obj`, takes a slot and sends, if a slot is free now (null: none was; the encoded
   * message is given back). Encoded before the slot is taken (NOTE [Queue slots]: a kill must
   * not lose a slot during an encoding).
   */
  trySend(obj: unknown): Promise<void> | null {
    let frame: Frame;
    try {
      frame = this.endpoint.encode(obj);
    } catch (e) {
      return Promise.reject(e);
    }
    if (!this.slots.tryTake()) {
      frame.abandon(); // it could travel: nothing more to check
      return null;
    }
    try {
      this.endpoint.sendEncoded(frame);
    } catch (e) {
      this.slots.giveBack();
      return Promise.reject(e);
    }
    GetSpin.sent(this.state.words); // NOTE [Spinning before sleeping]
    return settled(undefined); // NOTE [Letting the loop turn]
  }

  #closed = false;

  close(): void {
    // Its own flag, not the endpoint's: at a thread's exit the endpoint may be closed first
    // (a backlog's exit hook), and the shared state must still be closed here.
    if (this.#closed) return;
    this.#closed = true;
    this.slots.close(this.endpoint.closedError());
    this.endpoint.close();
    this.state.close();
  }

  closeAtExit(): void {
    this.close();
    this.endpoint.closeAtExit();
  }
}

let adopting: QueueCore | null = null;
/** Set while a subclass's reduction rebuilds through the Queue's: how to make the object (see queueParts). */
let rebuildAs: (() => Queue) | null = null;

/**
 * @internal What a subclass in another file (JoinableQueue) reaches of a Queue: its shared
 * words, its waiting puts, and its reduction under another name and class.
 */
export let queueParts!: {
  words(q: Queue): SharedWords;
  /** Puts of this process waiting for a slot (close() rejects them). */
  waitingPuts(q: Queue): number;
  /** How `type` travels: as a Queue, rebuilt by `make()` (a `new` of it, which adopts the received core). */
  reduction<Q extends Queue>(name: string, type: Function & { readonly prototype: Q }, make: () => Q): Reduction<Q>;
};

export class Queue<T = unknown> {
  readonly #core: QueueCore;

  constructor(options: QueueOptions | number = {}) {
    let claim: NameClaim | null = null;
    if (adopting !== null) {
      this.#core = adopting;
      adopting = null;
    } else {
      if (options !== null && typeof options !== 'object' && typeof options !== 'number') {
        throw new InvalidArgumentError(`new Queue() takes a maxsize or { maxsize } (got ${describeValue(options)}).`);
      }
      let given: unknown;
      try {
        given = typeof options === 'number' ? options : options?.maxsize;
      } catch (e) {
        // A revoked Proxy (or a throwing getter) as the options: the caller's error, named.
        throw new InvalidArgumentError(
          `new Queue() could not read its options (${(e as Error)?.message ?? String(e)}): pass a maxsize or { maxsize }.`,
          { cause: e },
        );
      }
      const maxsize = checkMaxsize(given);
      // Taken before anything is made: a name in use costs nothing (NOTE [Named objects]).
      claim = claimName(options, `new ${new.target.name}()`);
      let fds: [number, number];
      try {
        fds = addon.socketpair();
      } catch (e) {
        claim?.close();
        throw systemError(e, 'creating a queue');
      }
      let key: string;
      let state: SharedWords;
      try {
        key = identityKey(fds[1]);
        state = SharedWords.create(); // closes its own descriptor if it fails
      } catch (e) {
        closeAll(fds);
        claim?.close();
        throw e;
      }
      this.#core = new QueueCore(fds[0], fds[1], state, maxsize, key);
    }
    track(this, this.#core);
    this.#core.endpoint.setOwner(this); // NOTE [Waiting keeps the owner alive]
    remember(this.#core.key, this);
    claim?.serve(this);
  }

  /** The limit given at construction (Infinity when unbounded). */
  get maxsize(): number {
    return this.#core.slots.maxsize;
  }

  /**
   * Puts `obj` on the queue. Resolves once it is in the queue; a full bounded queue makes
   * it wait for a slot, `timeout` ms at most (then QueueFullError). A value that cannot
   * travel is refused (NotTransferableError) before anything is sent.
   */
  put(obj: T, options?: TimeoutOptions): Promise<void> {
    const extra = extraArgumentsError('Queue.put()', arguments, 2);
    if (extra !== null) return Promise.reject(extra);
    const core = this.#core;
    let timeout: number | null;
    try {
      timeout = timeoutOption(options);
      if (core.endpoint.closed) throw core.endpoint.closedError();
    } catch (e) {
      return Promise.reject(e);
    }
    if (core.slots.hasRoom()) {
      // A slot another process takes between the look and the claim makes this put wait.
      const sent = core.trySend(obj);
      if (sent !== null) return sent;
    } else {
      try {
        // Refuse what cannot travel now, not once a slot is free (NOTE [Queue slots]).
        checkMessage(obj);
      } catch (e) {
        return Promise.reject(e);
      }
    }
    if (timeout === 0) return Promise.reject(new QueueFullError(`The queue is full (maxsize ${core.slots.maxsize}).`));
    // NOTE [Spinning before sleeping]: a full queue's next slot is usually one get away. Not
    // while puts of this process wait already: they come first.
    if (core.slots.waiting === 0 && !core.endpoint.closed) {
      const spent = core.putSpin.spin(COUNT * 4, core.slots.maxsize, timeout);
      if (spent > 0) {
        const sent = core.trySend(obj);
        if (sent !== null) return sent;
        // The spin counts against the timeout; the error names the one given.
        if (timeout !== null) return core.slots.wait(obj, Math.max(0, timeout - spent), timeout);
      }
    }
    return core.slots.wait(obj, timeout);
  }

  /** torch put_nowait(): put with timeout 0. */
  putNowait(obj: T): Promise<void> {
    const extra = extraArgumentsError('Queue.putNowait()', arguments, 1);
    if (extra !== null) return Promise.reject(extra);
    return this.put(obj, { timeout: 0 });
  }

  /** The next message; waits `timeout` ms at most (then QueueEmptyError). */
  get(options?: TimeoutOptions): Promise<T> {
    const extra = extraArgumentsError('Queue.get()', arguments, 1);
    if (extra !== null) return Promise.reject(extra);
    let timeout: number | null;
    try {
      timeout = timeoutOption(options);
    } catch (e) {
      return Promise.reject(e);
    }
    const core = this.#core;
    if (timeout !== 0) {
      // NOTE [Spinning before sleeping]: SENT is read before COUNT, so a put between the two
      // either shows in COUNT or moves SENT while we watch it.
      const armed = core.spin.arm();
      if (armed !== null && core.slots.count() === 0 && !core.endpoint.receiving && !core.endpoint.closed) {
        const spent = core.spin.spin(armed, timeout);
        const given = timeout;
        // The spin counts against the timeout; the error names the one given.
        if (given !== null) return core.endpoint.receive(Math.max(0, given - spent), () => emptyError(given)) as Promise<T>;
      }
    }
    return core.endpoint.receive(timeout, emptyError) as Promise<T>;
  }

  /** torch get_nowait(): get with timeout 0. */
  getNowait(): Promise<T> {
    const extra = extraArgumentsError('Queue.getNowait()', arguments, 0);
    if (extra !== null) return Promise.reject(extra);
    return this.get({ timeout: 0 });
  }

  /** Messages put and not yet taken, in all processes (approximate while others work). */
  qsize(): number {
    checkArgCount('Queue.qsize()', arguments, 0);
    return Math.max(0, this.#core.slots.count());
  }

  /** True when no message is waiting to be received now. */
  empty(): boolean {
    checkArgCount('Queue.empty()', arguments, 0);
    return !this.#core.endpoint.ready();
  }

  /** True when a bounded queue holds maxsize messages. */
  full(): boolean {
    checkArgCount('Queue.full()', arguments, 0);
    return this.qsize() >= this.#core.slots.maxsize;
  }

  /**
   * No more puts or gets from this process: waiting gets and puts reject with
   * QueueClosedError; messages already put are still delivered (NOTE [Sending without
   * blocking]); other processes are not affected.
   */
  close(): void {
    checkArgCount('Queue.close()', arguments, 0);
    releaseName(this); // NOTE [Named objects]: the creator's close() gives the name up
    untrack(this.#core);
    this.#core.close();
  }

  /**
   * torch join_thread(): resolves once every message this process put has gone into the
   * queue (a put resolves at once even when the socket is full, and the message then waits
   * in this process: NOTE [Sending without blocking]). A process that exits waits for that
   * anyway, unless cancelJoinThread() was called; then this resolves at once.
   */
  joinThread(): Promise<void> {
    const extra = extraArgumentsError('Queue.joinThread()', arguments, 0);
    if (extra !== null) return Promise.reject(extra);
    return this.#core.endpoint.whenFlushed();
  }

  /**
   * torch cancel_join_thread(): this process may exit before what it put has gone into the
   * queue (its consumers may be gone, and it would otherwise wait for them for good). What
   * has not gone out by then is lost, its slots and shared memory given back.
   */
  cancelJoinThread(): void {
    checkArgCount('Queue.cancelJoinThread()', arguments, 0);
    this.#core.endpoint.cancelJoin();
  }

  /** True after close() in this process. */
  isClosed(): boolean {
    checkArgCount('Queue.isClosed()', arguments, 0);
    return this.#core.endpoint.closed;
  }

  static {
    const reduction: Reduction<Queue> = {
      name: 'queue',
      type: Queue,
      reduce(q, ctx) {
        const core = q.#core;
        if (core.endpoint.closed) throw core.endpoint.closedError();
        const max = core.slots.maxsize;
        return [max === Infinity ? 0 : max, ctx.fd(core.endpoint.sendFd), ctx.fd(core.endpoint.recvFd), ctx.fd(core.state.fd)];
      },
      rebuild(state, ctx) {
        const [maxsize, s, r, w] = checkState(state, 4, 'queue');
        const fds = [ctx.takeFd(s), ctx.takeFd(r), ctx.takeFd(w)];
        return reuseOrAdopt<Queue>(
          fds,
          1,
          (x) => !x.isClosed(),
          (key) => {
            let words: SharedWords;
            try {
              words = SharedWords.open(fds[2]!); // closes its descriptor if it fails
            } catch (e) {
              closeAll(fds.slice(0, 2));
              throw e;
            }
            adopting = new QueueCore(fds[0]!, fds[1]!, words, checkMaxsize(maxsize), key);
            return rebuildAs !== null ? rebuildAs() : new Queue();
          },
        );
      },
    };
    registerReduction(reduction);
    registerWaitable(Queue, (q) => q.#core.endpoint);
    queueParts = {
      words: (q) => q.#core.state,
      waitingPuts: (q) => q.#core.slots.waiting,
      reduction: (name, type, make) => ({
        name,
        type,
        reduce: reduction.reduce,
        rebuild(state, ctx) {
          rebuildAs = make;
          try {
            return reduction.rebuild(state, ctx) as ReturnType<typeof make>;
          } finally {
            rebuildAs = null;
          }
        },
      }),
    };
  }
}

function checkMaxsize(m: unknown): number {
  if (m === undefined || m === null) return Infinity;
  if (typeof m !== 'number' || !Number.isInteger(m))
    throw new InvalidArgumentError(`maxsize must be an integer (got ${describeValue(m)}).`);
  // torch: maxsize <= 0 means no limit. The slot count is a 32-bit word.
  if (m <= 0) return Infinity;
  if (m > 2 ** 31 - 2) throw new InvalidArgumentError(`maxsize must be at most ${2 ** 31 - 2} (got ${m}); use 0 for no limit.`);
  return m;
}
