// The one place where spawn arguments become bytes and back. See NOTE [Spawn arguments].
//
// NOTE [Spawn arguments]
// `encodeArgs(args)` turns the argument list into `{bytes, fds}`. `bytes` travels to the child
// in its start message (src/process/messages.ts); `fds` are descriptors the arguments refer
// to (shared-memory segments, queue sockets). A process child receives them at start in
// extra stdio slots: fds[k] is the child's descriptor CHILD_FD_BASE + k, which the child
// bootstrap duplicates (close-on-exec) and hands to `decodeArgs(bytes, fds)` in the same
// order. A thread child shares the parent's descriptor table and gets the parent's numbers
// unchanged. The descriptors are borrowed: spawn never closes them; the objects in `args`
// that own them keep them open at least until the children have started.
// Today arguments are v8-serialized and carry no descriptors; the transport layer's
// reduce/rebuild registry plugs in here, nowhere else.
import { serialize, deserialize } from 'node:v8';
import { NotTransferableError } from '../errors.js';

export interface EncodedArgs {
  bytes: Uint8Array;
  fds: number[];
}

/** The first stdio slot of a process child that holds an argument descriptor (3 is the control channel). */
export const CHILD_FD_BASE = 4;

export function encodeArgs(args: readonly unknown[]): EncodedArgs {
  // Walk first: v8.serialize silently drops nothing but names nothing either, and a path
  // ("args[1].fn") is what the user needs to fix the call.
  findNotTransferable(args, 'args', new Set());
  let bytes: Uint8Array;
  try {
    bytes = serialize(args);
  } catch (e) {
    throw new NotTransferableError(
      `args cannot be sent to a child: ${(e as Error).message}. Pass structured-clonable values ` +
        '(plain data, typed arrays, Maps, Sets, Dates, Errors) or tensorproc objects.',
      'args',
    );
  }
  return { bytes, fds: [] };
}

export function decodeArgs(bytes: Uint8Array, _fds: readonly number[]): unknown[] {
  return deserialize(bytes) as unknown[];
}

const CLONABLE_BUILTINS: Function[] = [
  Date, RegExp, ArrayBuffer, DataView, Error, Boolean, Number, String,
];

function findNotTransferable(value: unknown, path: string, seen: Set<object>): void {
  const type = typeof value;
  if (type === 'function' || type === 'symbol') fail(path, type === 'function' ? 'a function' : 'a symbol');
  if (value === null || type !== 'object') return;
  const obj = value as object;
  if (seen.has(obj)) return;
  seen.add(obj);
  if (ArrayBuffer.isView(obj) || CLONABLE_BUILTINS.some((C) => obj instanceof C)) return;
  if (obj instanceof SharedArrayBuffer) fail(path, 'a SharedArrayBuffer (use a shared tensor instead)');
  if (obj instanceof WeakMap || obj instanceof WeakSet || obj instanceof WeakRef) fail(path, `a ${obj.constructor.name}`);
  if (obj instanceof Promise) fail(path, 'a Promise (await it first)');
  if (Array.isArray(obj)) {
    obj.forEach((v, i) => findNotTransferable(v, `${path}[${i}]`, seen));
  } else if (obj instanceof Map) {
    for (const [k, v] of obj) {
      findNotTransferable(k, `${path}.keys()`, seen);
      findNotTransferable(v, `${path}.get(${JSON.stringify(String(k))})`, seen);
    }
  } else if (obj instanceof Set) {
    for (const v of obj) findNotTransferable(v, `${path}.values()`, seen);
  } else {
    for (const key of Object.keys(obj)) {
      const step = /^[A-Za-z_$][\w$]*$/.test(key) ? `.${key}` : `[${JSON.stringify(key)}]`;
      findNotTransferable((obj as Record<string, unknown>)[key], path + step, seen);
    }
  }
}

function fail(path: string, what: string): never {
  throw new NotTransferableError(
    `${path} is ${what}, which cannot be sent to another process or thread. ` +
      'Pass data instead; to run code in the child, export it from a module and name it in the target.',
    path,
  );
}
