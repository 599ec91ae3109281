// What hold() / holdSync() give: the scope of one acquire, for `using` and `await using`.
/** One acquire of a lock, semaphore or condition; release() (or leaving its scope) releases it, once. */
export class Held implements Disposable, AsyncDisposable {
  #release: (() => void) | null;
  /** The acquire took the lock over from a holder that had died (NOTE [Robust holders]). */
  readonly ownerDied: boolean;

  constructor(release: () => void, ownerDied: boolean) {
    this.#release = release;
    this.ownerDied = ownerDied;
  }

  /** Releases what was acquired; a second call does nothing. */
  release(): void {
    const r = this.#release;
    if (r === null) return;
    this.#release = null;
    r();
  }

  [Symbol.dispose](): void {
    this.release();
  }

  [Symbol.asyncDispose](): Promise<void> {
    this.release();
    return Promise.resolve();
  }
}
