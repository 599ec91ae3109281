// The messages between a spawn parent and its children, defined once for both sides, and
// their framing on the control channel.
//
// NOTE [Spawn control channel]
// A process child gets one end of an AF_UNIX SOCK_SEQPACKET socketpair as stdio slot 3. The
// parent writes the StartMessage into its end *before* starting the child, so the child
// finds it waiting and needs no round trip. The child answers at most once with an
// ErrorMessage, and then exits with code 1: like torch's error file but with no file to
// clean up. End of stream on the child side means the parent died (the
// child then exits, see child.ts); the parent learns of exits from the 'exit' event and
// drains the channel first, so an error sent just before exiting is never missed.
// Before that it says once that it has loaded its target (LoadedMessage), which is how
// ctx.started learns of it; a datagram that small always fits the socket buffer.
// A thread child gets the same StartMessage as workerData and answers on its parentPort;
// Node delivers a worker's last messages before its 'exit' event.
// SEQPACKET keeps message boundaries but caps one datagram near the socket buffer size, so a
// message is cut into frames of at most FRAME_BYTES; the first byte of each frame says
// whether more frames follow.
import { serialize, deserialize } from 'node:v8';

export type StartMethod = 'spawn' | 'thread';

/** Who a child is, for currentProcess() and parentProcess() in it (NOTE [Process identity], current.ts). */
export interface Identity {
  /** 'Process-1', 'Process-1:2' for the second child of Process-1, or the name a Process was given. */
  name: string;
  /** Python's _identity: the parent's, plus this child's number among the parent's children. */
  identity: number[];
  daemon: boolean;
  /** The parent as its own currentProcess() shows it. */
  parent: { name: string; pid: number; daemon: boolean; startMethod: StartMethod | null };
}

/** Parent -> child, once, at start. */
export interface StartMessage {
  kind: 'start';
  /** fn(index, ...args) for spawn()/startProcesses(); null for a Process: fn(...args). */
  index: number | null;
  /**
   * A file: URL, or a package specifier that the child resolves from `base`. The child
   * imports and checks it (NOTE [Loading the target in the child], target-load.ts).
   */
  module: string;
  exportName: string;
  /** The parent's working directory when it started the child: where a package specifier is resolved from. */
  base: string;
  /** encodeArgs(args).bytes, see NOTE [Spawn arguments]. */
  args: Uint8Array;
  /** Descriptors that came with the arguments: slots in a process child, the parent's own in a thread. */
  fds: number[];
  /** A module to import before the target so that a thread runs under the parent's TypeScript loader. */
  preload: string | null;
  identity: Identity;
}

/** An error thrown in a child, flattened so that any error (or thrown non-error) can travel. */
export interface SerializedError {
  name: string;
  message: string;
  stack: string;
  /** Own enumerable fields (code, errno, ...); values that cannot be cloned travel as their inspect() text. */
  fields: Record<string, unknown>;
  cause?: SerializedError;
}

/** Child -> parent, at most once, just before the child exits with code 1. */
export interface ErrorMessage {
  kind: 'error';
  /** true: the child could not load its target (a TargetNotFoundError, TargetNotFunctionError or TargetLoadError). */
  load: boolean;
  error: SerializedError;
  /** The text torch's traceback stands for: the stack, then each cause's stack. */
  trace: string;
}

/** Child -> parent: its arguments are decoded and its target is loaded; fn is called next (ChildHandle.started; ThreadChild.kill). */
export interface LoadedMessage {
  kind: 'loaded';
}

/** Thread child -> parent: it has decoded its arguments, with descriptors of its own (NOTE [Spawn arguments]). */
export interface ArgsTakenMessage {
  kind: 'args';
}

/**
 * Parent -> thread child: end now, as a process ends on SIGTERM, but through process.exit()
 * so that the thread's exit handlers close what it holds (NOTE [Stopping a thread child]).
 */
export interface StopMessage {
  kind: 'stop';
}

/** The exit code a thread stopped by a StopMessage exits with (128 + SIGTERM, as a shell shows it). */
export const STOP_EXIT_CODE = 143;

/**
 * A thread child's workerData: its StartMessage, and a word where it records how it ended
 * (EXIT_OWN, EXIT_STOPPED; 0 when worker.terminate() ended it, which runs no exit handler),
 * so that its parent reports a signal only for an exit the signal caused.
 */
export interface ThreadStartMessage extends StartMessage {
  exitState: Int32Array;
}
export const EXIT_OWN = 1;
export const EXIT_STOPPED = 2;

export type ParentMessage = StartMessage;
export type ChildMessage = ErrorMessage | LoadedMessage | ArgsTakenMessage;

export const CONTROL_FD = 3;
const FRAME_BYTES = 32 * 1024;
const MORE = 1;
const LAST = 0;

/** Cuts a message into datagrams (flag byte + payload). */
export function toFrames(message: ParentMessage | ChildMessage): Uint8Array[] {
  const body = serialize(message);
  const frames: Uint8Array[] = [];
  for (let at = 0; at < body.length || frames.length === 0; at += FRAME_BYTES) {
    const end = Math.min(at + FRAME_BYTES, body.length);
    const frame = new Uint8Array(1 + end - at);
    frame[0] = end < body.length ? MORE : LAST;
    frame.set(body.subarray(at, end), 1);
    frames.push(frame);
  }
  return frames;
}

/** Puts frames back together; `push` returns the message once its last frame arrived. */
export class FrameAssembler<M> {
  #parts: Uint8Array[] = [];

  push(datagram: Uint8Array): M | undefined {
    this.#parts.push(datagram.slice(1));
    if (datagram[0] === MORE) return undefined;
    const body = Buffer.concat(this.#parts);
    this.#parts = [];
    return deserialize(body) as M;
  }
}

/** The largest datagram a reader must accept. */
export const MAX_DATAGRAM = FRAME_BYTES + 1;
