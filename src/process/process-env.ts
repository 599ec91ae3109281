// The environment variable through which a process child learns its parent's pid (for the
// getppid() check after PR_SET_PDEATHSIG). Its own file so that the child imports no more
// than this string from the parent side.
export const PARENT_PID_ENV = 'TENSORPROC_SPAWN_PARENT_PID';

/**
 * Set on globalThis by the process bootstrap when its control channel ends (the parent is
 * gone), before it exits; read by the manager client (NOTE [No goodbye after the parent]).
 * A registered symbol: the bootstrap's bundle and the library are separate module copies.
 */
export const PARENT_GONE = Symbol.for('tensorproc.parentGone');
