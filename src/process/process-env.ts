// The environment variable through which a process child learns its parent's pid (for the
// getppid() check after PR_SET_PDEATHSIG). Its own file so that the child imports no more
// than this string from the parent side.
export const PARENT_PID_ENV = 'TENSORPROC_SPAWN_PARENT_PID';
