// The SyncManager's messages (Python's multiprocessing.managers, for Node). A process talks to
// the server over a Pipe of its own, whose far end it hands over once through the manager's
// request Queue (NOTE [Sync manager]). Requests and replies are arrays, so values of any
// structured-clone kind, tensors included (as handles: shared, not copied), travel inside.

/** The kinds of object a manager holds. */
export type Kind = 'dict' | 'list' | 'namespace' | 'queue' | 'lock' | 'value';
export const KINDS: readonly Kind[] = ['dict', 'list', 'namespace', 'queue', 'lock', 'value'];

/** [call id, object id (0: the manager itself), method, arguments]. */
export type Request = [id: number, object: number, method: string, args: unknown[]];

/** [call id, true, result] or [call id, false, error message, error code or null]. */
export type Reply = [id: number, ok: true, result: unknown] | [id: number, ok: false, message: string, code: string | null];

/** Put on the request Queue: the far end of a process's Pipe, and that process's pid. */
export interface Connect {
  readonly connect: unknown;
  readonly pid: number;
}
