// NOTE [One exit listener]: every layer has something to let go of when a process or a worker
// thread exits (the allocator its segments, the manager client its last word, the queues and
// the pool's ports their sockets, a thread child its descriptors and exit state...). Each used
// to add its own process.on('exit') listener; a worker thread that loads the whole library
// under file_system then had 11 with Node's own, and Node printed MaxListenersExceededWarning
// into the user's output for every such thread. So the library adds one listener per thread
// (module state is per thread, as `process` is) and runs the hooks in the order they were
// added, which is the order the separate listeners ran in. A hook that throws does not stop
// the others; the first error is thrown again once all have run, as a listener's would be.
// Imports nothing of the project, so that every layer may use it.

type Hook = (code: number) => void;

const hooks: Hook[] = [];
let installed = false;

function runHooks(code: number): void {
  let first: { error: unknown } | null = null;
  for (const hook of hooks.splice(0)) {
    try {
      hook(code);
    } catch (error) {
      first ??= { error };
    }
  }
  if (first) throw first.error;
}

/** Runs `hook(code)` when this process (or this worker thread) exits, after the hooks added before it. */
export function onExit(hook: Hook): void {
  if (!installed) {
    installed = true;
    process.on('exit', runHooks);
  }
  hooks.push(hook);
}
