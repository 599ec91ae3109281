// mp.currentProcess() and mp.parentProcess(), as Python's multiprocessing has them.
//
// NOTE [Process identity]
// Each child learns who it is from its StartMessage (messages.ts, Identity) before it loads
// its target, so that a target module's top-level code can ask `mp.parentProcess()`: null
// in a program's main process, the parent in every child, process or thread. That is the
// guard for a program that names its own entry module as the target (`if
// (mp.parentProcess() === null) await main()`), and it reads the same under both start
// methods, where `isMainThread` is true in a process child. Names follow Python's: a child
// is 'Process-N', N counting the children this process started (spawn's included), and a
// child of Process-1 is 'Process-1:N'. A pid is what the parent's handle shows: process.pid
// for a process, the threadId for a thread child (threads share process.pid). The record
// lives on globalThis under a registered symbol, so that the bundled bootstrap of a process
// child (NOTE [The process child's bundle]) and the library its target imports, or a second
// copy of the library, read the same one; globalThis is per thread, as the record must be (a
// thread child is its own "process").
import type { Identity, StartMethod } from './messages.js';

/** A process as currentProcess() and parentProcess() show it. */
export interface ProcessInfo {
  readonly name: string;
  /** The OS pid of a process; the threadId of a thread child. */
  readonly pid: number;
  readonly daemon: boolean;
  /** How it was started: null for a program's main process. */
  readonly startMethod: StartMethod | null;
}

interface Record {
  self: ProcessInfo;
  identity: number[];
  parent: ProcessInfo | null;
  /** How many children this process has named so far. */
  counter: number;
}

const KEY = Symbol.for('tensorproc.currentProcess');
type WithRecord = typeof globalThis & { [KEY]?: Record };

function record(): Record {
  const g = globalThis as WithRecord;
  return (g[KEY] ??= {
    self: Object.freeze({ name: 'MainProcess', pid: process.pid, daemon: false, startMethod: null }),
    identity: [],
    parent: null,
    counter: 0,
  });
}

/** This process: 'MainProcess' in a program's main process, its name and pid in a child. */
export function currentProcess(): ProcessInfo {
  return record().self;
}

/** The process that started this one, or null in a program's main process (Python's parent_process()). */
export function parentProcess(): ProcessInfo | null {
  return record().parent;
}

/** Parent side: the identity of the next child this process starts. `name` overrides the default. */
export function nextIdentity(daemon: boolean, name?: string): Identity {
  const r = record();
  const identity = [...r.identity, ++r.counter];
  return {
    name: name ?? `Process-${identity.join(':')}`,
    identity,
    daemon,
    parent: { ...r.self },
  };
}

/** Child side, before its target loads: who this process is; `pid` is its threadId in a thread child. */
export function setIdentity(id: Identity, startMethod: StartMethod, pid: number): void {
  const g = globalThis as WithRecord;
  g[KEY] = {
    self: Object.freeze({ name: id.name, pid, daemon: id.daemon, startMethod }),
    identity: id.identity,
    parent: Object.freeze({ ...id.parent }),
    counter: 0,
  };
}
