// The SyncManager's server: the main loop of the manager process (NOTE [Sync manager]). It takes
// each client process's Pipe end from the request Queue and serves that connection: requests in,
// replies out, a call that waits (a lock, a queue's get) answered when it can, without holding
// up the calls behind it. A connection that closes (its process ended) gives back the locks it
// held and its waiters. The process ends with its owner (a Process child dies with its parent),
// or on shutdown().
import { ManagerCallError, PipeClosedError, isTensorprocError } from '../errors.js';
import type { Connection, Queue } from '../queue/index.js';
import { KINDS, type Connect, type Kind, type Reply, type Request } from './protocol.js';
import { DROPPED, makeObject, type Obj, type Peer } from './server-objects.js';

const objects = new Map<number, Obj>();
let nextId = 1;

function manage(peer: Peer, conn: Connection<unknown>, method: string, args: unknown[]): unknown {
  switch (method) {
    case 'ping':
      return process.pid;
    case 'create': {
      const [kind, init] = args as [Kind, unknown];
      if (!KINDS.includes(kind)) throw new ManagerCallError(`A manager makes ${KINDS.join(', ')}; not ${String(kind)}.`);
      const id = nextId++;
      objects.set(id, makeObject(kind, init));
      return id;
    }
    case 'shutdown':
      // After the reply is on its way: the owner waits for this process to end.
      setImmediate(() => process.exit(0));
      return true;
    default:
      void peer;
      void conn;
      throw new ManagerCallError(`A manager has no method ${method}.`);
  }
}

async function answer(peer: Peer, conn: Connection<unknown>, req: Request): Promise<void> {
  let reply: Reply;
  const [id, objectId, method, args] = Array.isArray(req) ? req : [-1, -1, '', []];
  try {
    let result: unknown;
    if (objectId === 0) result = manage(peer, conn, method, args);
    else {
      const obj = objects.get(objectId);
      const fn = obj === undefined || method === DROPPED ? undefined : obj[method];
      if (fn === undefined)
        throw new ManagerCallError(
          obj === undefined ? `The manager holds no object ${objectId}.` : `A manager object has no method ${method}.`,
        );
      result = await fn(peer, Array.isArray(args) ? args : []);
    }
    reply = [id, true, result];
  } catch (e) {
    reply = [id, false, (e as Error)?.message ?? String(e), isTensorprocError(e) ? e.code : null];
  }
  if (peer.closed) return;
  try {
    await conn.send(reply);
  } catch {
    // the client went away meanwhile
  }
}

async function serve(conn: Connection<unknown>): Promise<void> {
  const peer: Peer = { closed: false };
  try {
    for (;;) void answer(peer, conn, (await conn.recv()) as Request);
  } catch (e) {
    if (!(e instanceof PipeClosedError)) throw e;
  } finally {
    peer.closed = true;
    for (const obj of objects.values()) obj[DROPPED]?.(peer, []);
    conn.close();
  }
}

/** The manager process's main: called with the manager's request Queue. */
export async function main(requests: Queue<Connect>): Promise<void> {
  for (;;) {
    const m = await requests.get();
    void serve(m.connect as Connection<unknown>).catch((e) => {
      process.emitWarning(`tensorproc manager: a connection failed: ${(e as Error)?.message ?? String(e)}`);
    });
  }
}
