// NODE_DEBUG=tensorproc: the events a user debugging a pipeline needs, through Node's
// util.debuglog (one line each on stderr, "TENSORPROC <pid>: ..."): segments made and
// recycled, the file_system manager started and its sweeps, children started and how they
// ended. Imports nothing of the project, so that every layer may use it.
//
// Call sites on hot paths (a recycled segment is one per message) test `debugEnabled`, a
// constant read once at load, before building their message: a disabled log then costs one
// branch and no string. Children inherit NODE_DEBUG with the environment, so one variable
// covers the whole process tree.
import { debuglog } from 'node:util';

const log = debuglog('tensorproc');

/** Whether NODE_DEBUG names tensorproc (fixed when this module loads, as debuglog fixes it). */
export const debugEnabled: boolean = log.enabled;

/** Logs one event (printf-style, as util.format) when NODE_DEBUG=tensorproc. */
export function debug(format: string, ...args: unknown[]): void {
  if (debugEnabled) log(format, ...args);
}
