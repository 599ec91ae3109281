// A child started as a worker thread (startMethod 'thread'). Same semantics as a process
// child, with two stand-ins: the "pid" is the worker's threadId, and a signal is
// worker.terminate() (a thread cannot be signalled alone), reported as that signal.
import { Worker } from 'node:worker_threads';
import { ChildHandle } from './child-handle.js';
import { formatTrace, serializeError } from './error-payload.js';
import type { ChildMessage, StartMessage } from './messages.js';

export class ThreadChild extends ChildHandle {
  readonly startMethod = 'thread' as const;
  readonly pid: number;
  readonly #worker: Worker;
  #killedWith: NodeJS.Signals | null = null;

  constructor(
    start: StartMessage,
    options: { entry: URL; daemon: boolean },
    onExit: (child: ChildHandle) => void,
  ) {
    super(start.index, onExit);
    const worker = new Worker(options.entry, { workerData: start });
    this.#worker = worker;
    this.pid = worker.threadId;
    worker.on('message', (m: ChildMessage) => {
      if (m?.kind === 'error') this.error ??= m;
    });
    // An error outside fn that the bootstrap could not catch (it failed to load, say).
    worker.on('error', (e) => {
      if (this.error) return;
      const error = serializeError(e);
      this.error = { kind: 'error', error, trace: formatTrace(error) };
    });
    worker.once('exit', (code) => this.finish(this.#killedWith ? null : code, this.#killedWith));
    if (options.daemon) worker.unref();
  }

  kill(signal: NodeJS.Signals = 'SIGTERM'): void {
    if (!this.isAlive() || this.#killedWith) return;
    this.#killedWith = signal;
    void this.#worker.terminate();
  }

  setRef(ref: boolean): void {
    if (ref) this.#worker.ref();
    else this.#worker.unref();
  }
}
