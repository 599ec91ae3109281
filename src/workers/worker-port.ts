// Both ends of one worker's channel as they travel and arrive (NOTE [Worker set]): the parent
// gives a worker the child end of a socketpair as a ChildEnd in its start arguments; the
// worker receives it as a WorkerPort, its inbox and its way back to the parent.
import { onExit } from '../exit-hooks.js';
import { isMainThread } from 'node:worker_threads';
import { PipeClosedError } from '../errors.js';
import { Endpoint, registerReduction, type Frame } from '../transport/index.js';

export { NOTHING } from '../transport/index.js';

/** What next() and take() return once the parent has closed the inbox: stop. */
export const END: unique symbol = Symbol('end of inbox');

/** Parent side: the child end of a worker's socketpair, as it is put in the start arguments. */
export class ChildEnd {
  constructor(readonly fd: number) {}
}

/**
 * Worker side: the inbox (messages from the parent, in order) and the way back. The parent
 * asks a worker to stop by closing its end: next() then gives END, once every message sent
 * before has been taken.
 */
export class WorkerPort {
  readonly #endpoint: Endpoint;
  #ended = false;

  /** @internal Made when a ChildEnd arrives. */
  constructor(fd: number) {
    this.#endpoint = new Endpoint(fd, fd, { what: 'worker channel' });
    open.add(this);
  }

  /** The next message, waiting for it; END once the parent has closed the inbox. */
  next(): Promise<unknown> {
    if (this.#ended) return Promise.resolve(END);
    return this.#endpoint.receive(null).then(undefined, (e: unknown) => this.#endOr(e));
  }

  /** The next message if one is waiting, NOTHING if none, END once the inbox is closed. */
  take(): unknown {
    if (this.#ended) return END;
    try {
      return this.#endpoint.receiveNow();
    } catch (e) {
      return this.#endOr(e);
    }
  }

  #endOr(e: unknown): typeof END {
    if (!(e instanceof PipeClosedError)) throw e;
    this.#ended = true;
    return END;
  }

  /**
   * Sends `value` to the parent (kept and sent in order if the socket is full). Returns
   * false when the parent has closed the channel: nothing can arrive there any more.
   */
  send(value: unknown): boolean {
    return this.sendFrame(this.#endpoint.encode(value));
  }

  /** send() of a frame already encoded (encodeMessage), taken whatever happens. */
  sendFrame(frame: Frame): boolean {
    try {
      this.#endpoint.sendEncoded(frame);
      return true;
    } catch (e) {
      if (e instanceof PipeClosedError) return false;
      throw e;
    }
  }

  /** Resolves once everything sent has gone into the socket. */
  flushed(): Promise<void> {
    return this.#endpoint.whenFlushed();
  }

  close(): void {
    open.delete(this);
    this.#endpoint.close();
  }

  /** close() for a thread that exits now: threads share the process's descriptors. */
  closeAtExit(): void {
    open.delete(this);
    this.#endpoint.closeAtExit();
  }

  static {
    registerReduction<ChildEnd | WorkerPort>({
      name: 'pool-worker-port',
      type: ChildEnd,
      reduce(end, ctx) {
        return ctx.fd((end as ChildEnd).fd);
      },
      rebuild(state, ctx) {
        return new WorkerPort(ctx.takeFd(state as number));
      },
    });
  }
}

/** What a worker main is given: its id in the set, its port, and its start arguments. */
export interface WorkerStart<A extends readonly unknown[] = unknown[]> {
  readonly id: number;
  readonly port: WorkerPort;
  readonly args: A;
}

/**
 * Makes the export a worker set starts (NOTE [Worker set]):
 * `export const main = workerMain(async ({ id, port, args }) => { ... })`. The worker ends
 * when `main` returns (its port is closed then) and fails, reported as its exit, when it throws.
 */
export function workerMain<A extends readonly unknown[]>(
  main: (start: WorkerStart<A>) => unknown,
): (index: number, port: WorkerPort, id: number, args: A) => Promise<void> {
  return async (_index, port, id, args) => {
    try {
      await main({ id, port, args });
    } finally {
      port.close();
    }
  };
}

// A worker thread closes the ports it still holds when it exits (NOTE [Stopping a thread child]).
const open = new Set<WorkerPort>();
if (!isMainThread) {
  onExit(() => {
    for (const port of open) port.closeAtExit();
  });
}
