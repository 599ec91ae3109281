// Every environment variable tensorproc reads, in one table: its name, its default and what it
// does. Code reads them through envString() / envNumber(), typed by this table, so a variable
// cannot be read without being listed here; docs/tensors.md and `tensorproc doctor` show it.
// Ground floor: it imports nothing.

interface EnvVar {
  /** The value used when the variable is unset, empty or invalid (null: computed, see meaning). */
  readonly default: number | string | null;
  readonly meaning: string;
}

export const ENV = {
  TENSORPROC_SHARING_STRATEGY: {
    default: 'file_descriptor',
    meaning: "The default sharing strategy of a process tree ('file_descriptor' or 'file_system'); children inherit it.",
  },
  TENSORPROC_CACHE_BYTES: {
    default: 512 * 2 ** 20,
    meaning: 'Bytes of free shared segments a process keeps for reuse (per process).',
  },
  TENSORPROC_CACHE_DECAY_MS: {
    default: 2000,
    meaning: 'A free cached segment not reused for this long is given back to the system.',
  },
  TENSORPROC_KEEP_FDS: {
    default: null,
    meaning:
      'Descriptors of received file_descriptor segments kept open for passing them on (default: half the open-file limit, at least 16).',
  },
  TENSORPROC_PACK_BYTES: {
    default: 512,
    meaning: 'Shared storages up to this size are packed into 64 KiB slab segments (0 turns packing off; at most 4096).',
  },
  TENSORPROC_MAX_MAPS: {
    default: null,
    meaning: "A ceiling on this process's memory mappings to stay under (default: vm.max_map_count).",
  },
  TENSORPROC_SEGMENT_WAIT_MS: {
    default: null,
    meaning:
      'How long an allocation waits for a busy segment of its size before making a new one (default: what a new one costs, measured).',
  },
  TENSORPROC_STREAM_FILL_BYTES: {
    default: null,
    meaning: 'fill() uses streaming stores from this size on (default: a quarter of the last-level cache, at most 16 MiB).',
  },
  TENSORPROC_SPIN_US: {
    default: 200,
    meaning: 'Microseconds a Queue get() on an empty queue, or put() on a full one, spins before sleeping (0: never; never on one CPU).',
  },
  TENSORPROC_MANAGER: {
    default: '1',
    meaning: "'0' turns the file_system manager off (no cleanup after killed processes, no warning).",
  },
  TENSORPROC_MANAGER_DIR: {
    default: null,
    meaning: "The manager's directory (default: $XDG_RUNTIME_DIR/tensorproc, else /tmp/tensorproc-<uid>).",
  },
  TENSORPROC_MANAGER_IDLE_MS: {
    default: 10_000,
    meaning: 'The manager exits after this long with no user alive and nothing pending.',
  },
  TENSORPROC_MANAGER_CLEAN_GRACE_MS: {
    default: 2000,
    meaning: 'How long the manager keeps a name whose holders all let go on purpose, for messages in flight.',
  },
  TENSORPROC_MANAGER_LOG: {
    default: null,
    meaning:
      'A file the manager appends what it removes, and why, to (default: manager.log in its directory under NODE_DEBUG=tensorproc, else none).',
  },
  TENSORPROC_ADDON: {
    default: null,
    meaning: 'Load the native addon from this path (a build of your own), and only from there.',
  },
  TENSORPROC_CUDA_LIBRARY: {
    default: null,
    meaning: 'Load the CUDA driver from this path instead of libcuda.so.1 (the tests point it at a stand-in).',
  },
  TENSORPROC_CUDA_CACHE_BYTES: {
    default: 2147483648,
    meaning: 'Free device memory each process keeps cached per device for reuse (bytes); past it the oldest is given back.',
  },
  TENSORPROC_CUDA_BUSY: {
    default: 256,
    meaning:
      'Device allocations the owner follows while other processes still hold them; past it the oldest is let go (the holders keep it alive).',
  },
  TENSORPROC_REQUIRE_CUDA: {
    default: null,
    meaning: 'Tests only: when 1, a CUDA test that would be skipped for want of a driver fails instead (the device script sets it).',
  },
  TENSORPROC_SPAWN_PARENT_PID: {
    default: null,
    meaning: "Internal: a process child's parent pid, for its check after PR_SET_PDEATHSIG. Set by tensorproc.",
  },
  TENSORPROC_HOST_ID: {
    default: null,
    meaning:
      "This host's name in a cluster (tensorproc/cluster): agents and heads on one host share it (default: os.hostname()); an agent sets it for its workers.",
  },
} as const satisfies Record<`TENSORPROC_${string}`, EnvVar>;

export type EnvName = keyof typeof ENV;

/** Whether `name` is one of the table's variables. */
export function isEnvName(name: string): name is EnvName {
  return Object.hasOwn(ENV, name);
}

/** The variable's value; undefined when unset or empty. */
export function envString(name: EnvName): string | undefined {
  const v = process.env[name];
  return v === undefined || v === '' ? undefined : v;
}

/** The variable as a number when it is set, a number, and `valid`; else undefined (the caller's default). */
export function envNumber(name: EnvName, valid: (n: number) => boolean = (n) => n >= 0): number | undefined {
  const v = envString(name);
  if (v === undefined) return undefined;
  const n = Number(v);
  return Number.isFinite(n) && valid(n) ? n : undefined;
}

/** The environment variable through which a process child learns its parent's pid. */
export const PARENT_PID_ENV = 'TENSORPROC_SPAWN_PARENT_PID' satisfies EnvName;

/**
 * Set on globalThis by the process bootstrap when its control channel ends (the parent is
 * gone), before it exits; read by the manager client (NOTE [No goodbye after the parent]).
 * A registered symbol: the bootstrap's bundle and the library are separate module copies.
 */
export const PARENT_GONE = Symbol.for('tensorproc.parentGone');
