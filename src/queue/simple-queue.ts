// SimpleQueue: torch.multiprocessing.SimpleQueue. Unbounded, no timeouts, no shared state:
// just the socketpair of a Queue (NOTE [Frames], NOTE [Sending without blocking]).
import { addon, systemError } from '../native/index.js';
import { Endpoint, registerReduction } from '../transport/index.js';
import { registerWaitable } from './waitable.js';
import { checkState, remember, keyOrClose, reuseOrAdopt, track, untrack } from './lifetime.js';
import { checkArgCount, extraArgumentsError } from '../arguments.js';
import { claimName, releaseName, type NameClaim } from '../transport/names/index.js';

export interface SimpleQueueOptions {
  /** Reachable by this name from any process of this user: `mp.attach(name)` (NOTE [Named objects]). */
  name?: string;
}

let adopting: { endpoint: Endpoint; key: string } | null = null;

export class SimpleQueue<T = unknown> {
  readonly #endpoint: Endpoint;

  constructor(options?: SimpleQueueOptions) {
    let key: string | null = null;
    let claim: NameClaim | null = null;
    if (adopting !== null) {
      ({ endpoint: this.#endpoint, key } = adopting);
      adopting = null;
    } else {
      claim = claimName(options, 'new SimpleQueue()'); // NOTE [Named objects]
      let fds: [number, number];
      try {
        fds = addon.socketpair();
      } catch (e) {
        claim?.close();
        throw systemError(e, 'creating a queue');
      }
      this.#endpoint = new Endpoint(fds[0], fds[1], { what: 'queue' });
      try {
        key = keyOrClose(this.#endpoint);
      } catch (e) {
        claim?.close();
        throw e;
      }
    }
    track(this, this.#endpoint);
    this.#endpoint.setOwner(this); // NOTE [Waiting keeps the owner alive]
    remember(key!, this);
    claim?.serve(this);
  }

  /** Puts `obj` on the queue; resolves once it is in the queue. */
  put(obj: T): Promise<void> {
    const extra = extraArgumentsError('SimpleQueue.put()', arguments, 1);
    if (extra !== null) return Promise.reject(extra);
    return this.#endpoint.sendValue(obj);
  }

  /** The next message, waiting as long as it takes. */
  get(): Promise<T> {
    const extra = extraArgumentsError('SimpleQueue.get()', arguments, 0);
    if (extra !== null) return Promise.reject(extra);
    return this.#endpoint.receive(null) as Promise<T>;
  }

  /** True when no message is waiting to be received now. */
  empty(): boolean {
    checkArgCount('SimpleQueue.empty()', arguments, 0);
    return !this.#endpoint.ready();
  }

  close(): void {
    checkArgCount('SimpleQueue.close()', arguments, 0);
    releaseName(this); // NOTE [Named objects]
    untrack(this.#endpoint);
    this.#endpoint.close();
  }

  isClosed(): boolean {
    checkArgCount('SimpleQueue.isClosed()', arguments, 0);
    return this.#endpoint.closed;
  }

  static {
    registerWaitable(SimpleQueue, (q) => q.#endpoint);
    registerReduction<SimpleQueue>({
      name: 'simple-queue',
      type: SimpleQueue,
      reduce(q, ctx) {
        const e = q.#endpoint;
        if (e.closed) throw e.closedError();
        return [ctx.fd(e.sendFd), ctx.fd(e.recvFd)];
      },
      rebuild(state, ctx) {
        const [s, r] = checkState(state, 2, 'queue');
        const fds = [ctx.takeFd(s), ctx.takeFd(r)];
        return reuseOrAdopt<SimpleQueue>(
          fds,
          1,
          (x) => !x.isClosed(),
          (key) => {
            adopting = { endpoint: new Endpoint(fds[0]!, fds[1]!, { what: 'queue' }), key };
            return new SimpleQueue();
          },
        );
      },
    });
  }
}
