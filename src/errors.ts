// Every error a user can cause, in one table. Each class has a stable `code` (ERR_TP_*) that
// callers may switch on; messages say what was wrong and what to do. Classes extend the
// built-in that fits (TypeError for a wrong kind of value, RangeError for a value out of
// range), so `instanceof TypeError` keeps working for code that predates tensorproc.

export interface CodedError extends Error {
  readonly code: string;
}

/** True for any error thrown by tensorproc (every one has an ERR_TP_* code). */
export function isTensorprocError(e: unknown): e is CodedError {
  return e instanceof Error && typeof (e as CodedError).code === 'string' && (e as CodedError).code.startsWith('ERR_TP_');
}

// --- sharing strategies ----------------------------------------------------------------
export class InvalidStrategyError extends TypeError {
  readonly code = 'ERR_TP_INVALID_STRATEGY';
  override name = 'InvalidStrategyError';
}

// --- tensors ---------------------------------------------------------------------------
export class InvalidDtypeError extends TypeError {
  readonly code = 'ERR_TP_INVALID_DTYPE';
  override name = 'InvalidDtypeError';
}
export class InvalidShapeError extends RangeError {
  readonly code = 'ERR_TP_INVALID_SHAPE';
  override name = 'InvalidShapeError';
}
export class IndexOutOfRangeError extends RangeError {
  readonly code = 'ERR_TP_INDEX_OUT_OF_RANGE';
  override name = 'IndexOutOfRangeError';
}
export class InvalidArgumentError extends TypeError {
  readonly code = 'ERR_TP_INVALID_ARGUMENT';
  override name = 'InvalidArgumentError';
}
export class NotContiguousError extends Error {
  readonly code = 'ERR_TP_NOT_CONTIGUOUS';
  override name = 'NotContiguousError';
}
export class ReleasedError extends Error {
  readonly code = 'ERR_TP_RELEASED';
  override name = 'ReleasedError';
}

// --- CUDA ------------------------------------------------------------------------------
/** No usable CUDA driver or device in this process; the message names the reason (mp.cuda.unavailableReason()). */
export class CudaUnavailableError extends Error {
  readonly code = 'ERR_TP_CUDA_UNAVAILABLE';
  override name = 'CudaUnavailableError';
}
/** A CUDA driver call failed: `cuResult` (the CUresult), `cuName` (its name) and `call` say which. */
export class CudaDriverError extends Error {
  readonly code: string = 'ERR_TP_CUDA_DRIVER';
  override name = 'CudaDriverError';
  readonly cuResult: number;
  readonly cuName: string;
  readonly call: string;
  constructor(message: string, cause: { cuResult?: number; code?: string; call?: string }) {
    super(message, { cause });
    this.cuResult = cause.cuResult ?? 0;
    this.cuName = cause.code ?? 'CUDA_ERROR_UNKNOWN';
    this.call = cause.call ?? 'unknown';
  }
}
/** The device is out of memory (after tensorproc gave back its cached device memory once). */
export class CudaOutOfMemoryError extends CudaDriverError {
  override readonly code = 'ERR_TP_CUDA_OUT_OF_MEMORY';
  override name = 'CudaOutOfMemoryError';
}
/** A device cannot share its memory with other processes (no virtual-memory management or POSIX descriptor handles). */
export class CudaIpcUnsupportedError extends Error {
  readonly code = 'ERR_TP_CUDA_IPC_UNSUPPORTED';
  override name = 'CudaIpcUnsupportedError';
}
/** Host element access (data, get, set, toArray) on a tensor whose elements are on a CUDA device. */
export class CudaHostAccessError extends Error {
  readonly code = 'ERR_TP_CUDA_HOST_ACCESS';
  override name = 'CudaHostAccessError';
}
/** An operation mixing tensors of different devices (copy() of a CUDA tensor into a CPU one...). */
export class DeviceMismatchError extends Error {
  readonly code = 'ERR_TP_DEVICE_MISMATCH';
  override name = 'DeviceMismatchError';
}
/** A received CUDA tensor's device (by UUID) is not visible in this process (CUDA_VISIBLE_DEVICES). */
export class CudaDeviceNotVisibleError extends Error {
  readonly code = 'ERR_TP_CUDA_DEVICE_NOT_VISIBLE';
  override name = 'CudaDeviceNotVisibleError';
}
/** A received CUDA tensor cannot be passed on (the driver refused to export it again): send a clone(). */
export class CudaNotForwardableError extends Error {
  readonly code = 'ERR_TP_CUDA_NOT_FORWARDABLE';
  override name = 'CudaNotForwardableError';
}

// --- shared memory and the system -------------------------------------------------------
/** A system call failed. `errno` (negative, as in Node), `syscall` and `errnoName` say which. */
export class TensorprocSystemError extends Error {
  readonly code: string = 'ERR_TP_SYSTEM';
  override name = 'TensorprocSystemError';
  readonly errno: number;
  readonly syscall: string;
  readonly errnoName: string;
  constructor(message: string, cause: { errno?: number; syscall?: string; code?: string }) {
    super(message, { cause });
    this.errno = cause.errno ?? 0;
    this.syscall = cause.syscall ?? 'unknown';
    this.errnoName = cause.code ?? 'EUNKNOWN';
  }
}
/** Shared memory (/dev/shm or the memory limit) cannot hold the segment asked for. */
export class ShmFullError extends TensorprocSystemError {
  override readonly code = 'ERR_TP_SHM_FULL';
  override name = 'ShmFullError';
}
/** The open-file limit was reached (EMFILE/ENFILE). */
export class TooManyFilesError extends TensorprocSystemError {
  override readonly code = 'ERR_TP_TOO_MANY_FILES';
  override name = 'TooManyFilesError';
}
/** A received handle names a segment that no longer exists. */
export class SegmentGoneError extends TensorprocSystemError {
  override readonly code = 'ERR_TP_SEGMENT_GONE';
  override name = 'SegmentGoneError';
}
/** A received handle does not fit its segment (claims more bytes than it holds, bad header). */
export class BadHandleError extends Error {
  readonly code = 'ERR_TP_BAD_HANDLE';
  override name = 'BadHandleError';
}
export class AddonError extends Error {
  readonly code = 'ERR_TP_ADDON_MISSING';
  override name = 'AddonError';
}

/**
 * A new shared segment would take one of the last memory mappings the kernel allows this
 * process (vm.max_map_count), which Node needs for its own heap (NOTE [Mapping budget]).
 */
export class TooManyMappingsError extends Error {
  readonly code = 'ERR_TP_TOO_MANY_MAPPINGS';
  override name = 'TooManyMappingsError';
}

// --- file-backed tensors (mp.fromFile) --------------------------------------------------
/** A write to a tensor mapped with fromFile(path, { writable: false }) (the default). */
export class ReadOnlyError extends TypeError {
  readonly code = 'ERR_TP_READ_ONLY';
  override name = 'ReadOnlyError';
}
/** fromFile() could not open or map the path: `errnoName` says why (ENOENT, EACCES, EISDIR...). */
export class FileOpenError extends TensorprocSystemError {
  override readonly code = 'ERR_TP_FILE_OPEN';
  override name = 'FileOpenError';
}
/** fromFile()'s dtype, offset and shape do not fit the file (past its end, not a whole number of elements). */
export class FileSizeError extends RangeError {
  readonly code = 'ERR_TP_FILE_SIZE';
  override name = 'FileSizeError';
}
/** The file behind a fromFile() tensor shrank under its mapping: its bytes are gone. */
export class FileTruncatedError extends Error {
  readonly code = 'ERR_TP_FILE_TRUNCATED';
  override name = 'FileTruncatedError';
}
/** A fromFile() tensor arrived, but its path now names another file (replaced or renamed). */
export class FileChangedError extends Error {
  readonly code = 'ERR_TP_FILE_CHANGED';
  override name = 'FileChangedError';
}

// --- the SyncManager (mp.Manager) ---------------------------------------------------------
/** A manager proxy's call whose manager process is gone (shut down, killed, or never reached). */
export class ManagerGoneError extends Error {
  readonly code = 'ERR_TP_MANAGER_GONE';
  override name = 'ManagerGoneError';
}
/** A call a manager's object refused: no such method on that kind of object, or arguments it cannot take. */
export class ManagerCallError extends Error {
  readonly code = 'ERR_TP_MANAGER_CALL';
  override name = 'ManagerCallError';
}

// --- processes -------------------------------------------------------------------------
// torch.multiprocessing's ProcessException family. The constructor takes torch's arguments
// in torch's order (msg, errorIndex, pid[, exitCode, signalName]) so ported code reads the same.
/** A child of spawn()/startProcesses() failed; `errorIndex` is its index, `pid` its pid (threadId for threads). */
export class ProcessException extends Error {
  readonly code: string = 'ERR_TP_PROCESS';
  override name = 'ProcessException';
  constructor(
    message: string,
    readonly errorIndex: number,
    readonly pid: number,
    options?: ErrorOptions,
  ) {
    super(message, options);
  }
}
/** The child threw (or rejected): the message holds its stack, `cause` is its error rebuilt with its fields. */
export class ProcessRaisedException extends ProcessException {
  override readonly code = 'ERR_TP_PROCESS_RAISED';
  override name = 'ProcessRaisedException';
}
/**
 * The child exited with a non-zero code or was killed by a signal. As in torch, a signal
 * shows as a negative `exitCode` (-9 for SIGKILL) and `signalName` names it.
 */
export class ProcessExitedException extends ProcessException {
  override readonly code = 'ERR_TP_PROCESS_EXITED';
  override name = 'ProcessExitedException';
  constructor(
    message: string,
    errorIndex: number,
    pid: number,
    readonly exitCode: number,
    readonly signalName: string | null = null,
  ) {
    super(message, errorIndex, pid);
  }
  /** The host the worker ran on, for a worker of a cluster Pool (docs/cluster.md); null for a local one. */
  host: string | null = null;
}
// A child that cannot load its target reports one of these three (NOTE [Loading the target
// in the child]); the parent throws it with the child's index (null for a Process) and pid.
/** A spawn target names a module that cannot be found. */
export class TargetNotFoundError extends TypeError {
  readonly code = 'ERR_TP_TARGET_NOT_FOUND';
  override name = 'TargetNotFoundError';
  errorIndex: number | null = null;
  pid: number | null = null;
}
/** A spawn target's module loads but its export is missing or is not a function. */
export class TargetNotFunctionError extends TypeError {
  readonly code = 'ERR_TP_TARGET_NOT_FUNCTION';
  override name = 'TargetNotFunctionError';
  errorIndex: number | null = null;
  pid: number | null = null;
}
/**
 * A function target imported in this process (a data loader's dataset factory, collate or
 * workerInit; never a spawn target, which its children import) names the program's entry
 * module while that module's top-level code still runs: the import would wait for itself.
 */
export class TargetIsEntryError extends TypeError {
  readonly code = 'ERR_TP_TARGET_IS_ENTRY';
  override name = 'TargetIsEntryError';
}
/**
 * A child tried to start processes while it was still importing its target module: the
 * module starts them at its top level, which every child would repeat (torch: "An attempt
 * has been made to start a new process before the current process has finished its
 * bootstrapping phase").
 */
export class SpawnInBootstrapError extends Error {
  readonly code = 'ERR_TP_SPAWN_IN_BOOTSTRAP';
  override name = 'SpawnInBootstrapError';
}
/** A spawn target's module was found but failed to load (syntax error, threw at top level). */
export class TargetLoadError extends Error {
  readonly code = 'ERR_TP_TARGET_LOAD';
  override name = 'TargetLoadError';
  errorIndex: number | null = null;
  pid: number | null = null;
}
/** A value cannot cross to another process or thread (a function, a symbol, a WeakMap...). `path` says where. */
export class NotTransferableError extends TypeError {
  readonly code = 'ERR_TP_NOT_TRANSFERABLE';
  override name = 'NotTransferableError';
  constructor(
    message: string,
    readonly path: string,
  ) {
    super(message);
  }
}

// --- queues and transport ----------------------------------------------------------------
/** `get({timeout})` found nothing within the timeout (torch's queue.Empty). */
export class QueueEmptyError extends Error {
  readonly code = 'ERR_TP_QUEUE_EMPTY';
  override name = 'QueueEmptyError';
}
/** `put(obj, {timeout})` found the queue full for the whole timeout (torch's queue.Full). */
export class QueueFullError extends Error {
  readonly code = 'ERR_TP_QUEUE_FULL';
  override name = 'QueueFullError';
}
/** The queue, pipe end or event was closed in this process (close()); it cannot be used any more here. */
export class QueueClosedError extends Error {
  readonly code = 'ERR_TP_QUEUE_CLOSED';
  override name = 'QueueClosedError';
}
/** The other end of a pipe (or every receiving end of a queue) was closed in every process: nothing more can arrive or be delivered. */
export class PipeClosedError extends Error {
  readonly code = 'ERR_TP_PIPE_CLOSED';
  override name = 'PipeClosedError';
}
/** A received message is not a well-formed tensorproc frame (corrupt, truncated, or from another program). */
export class FrameDecodeError extends Error {
  readonly code = 'ERR_TP_BAD_FRAME';
  override name = 'FrameDecodeError';
}
/** One message would carry more descriptors than a socket message can (253). */
export class TooManyDescriptorsError extends RangeError {
  readonly code = 'ERR_TP_TOO_MANY_DESCRIPTORS';
  override name = 'TooManyDescriptorsError';
}

// --- file_system manager ---------------------------------------------------------------
/**
 * The file_system manager (NOTE [The file_system manager]) could not be reached or started.
 * Emitted as a process warning, not thrown: named segments still work, but those held by a
 * process that is killed will stay in /dev/shm until removed by hand.
 */
export class ManagerUnavailableError extends Error {
  readonly code = 'ERR_TP_MANAGER_UNAVAILABLE';
  override name = 'ManagerUnavailableError';
}

// --- data loading ------------------------------------------------------------------------
/** What was passed as a dataset is neither map-style ({ length, getItem }), an (async) iterable, nor a dataset target. */
export class InvalidDatasetError extends TypeError {
  readonly code = 'ERR_TP_INVALID_DATASET';
  override name = 'InvalidDatasetError';
}
/**
 * A DataLoader with workers was given a dataset object (or a collate / workerInit function):
 * a worker process cannot receive it, it must build its own from a target.
 */
export class DatasetNeedsTargetError extends TypeError {
  readonly code = 'ERR_TP_DATASET_NEEDS_TARGET';
  override name = 'DatasetNeedsTargetError';
}
/** TensorDataset's tensors, or StackDataset's datasets, differ in length (torch's "Size mismatch"). */
export class DatasetSizeMismatchError extends RangeError {
  readonly code = 'ERR_TP_DATASET_SIZE_MISMATCH';
  override name = 'DatasetSizeMismatchError';
}
/** The default collate cannot batch these samples (`path` says where: `batch[3].image`). */
export class CollateError extends TypeError {
  readonly code = 'ERR_TP_COLLATE';
  override name = 'CollateError';
  constructor(
    message: string,
    readonly path: string,
  ) {
    super(message);
  }
}
/** loader.length of an iterable dataset that has no length (torch's TypeError). */
export class NoLengthError extends TypeError {
  readonly code = 'ERR_TP_NO_LENGTH';
  override name = 'NoLengthError';
}
/** loadStateDict() was given something stateDict() did not make, or made for another loader. */
export class BadStateDictError extends TypeError {
  readonly code = 'ERR_TP_BAD_STATE_DICT';
  override name = 'BadStateDictError';
}
/** No batch arrived within the loader's `timeout` (torch: "DataLoader timed out after N seconds"). */
export class DataLoaderTimeoutError extends Error {
  readonly code = 'ERR_TP_DATALOADER_TIMEOUT';
  override name = 'DataLoaderTimeoutError';
}
/**
 * A DataLoader worker threw while loading a batch (or in its dataset factory or workerInit):
 * `workerId`, the batch's `indices` (null for an iterable dataset), and the child's stack in the message.
 */
export class DataLoaderWorkerError extends Error {
  readonly code = 'ERR_TP_WORKER_RAISED';
  override name = 'DataLoaderWorkerError';
  constructor(
    message: string,
    readonly workerId: number,
    readonly pid: number,
    readonly indices: readonly number[] | null,
    options?: ErrorOptions,
  ) {
    super(message, options);
  }
}
/** A DataLoader worker died (a signal, the OOM killer, process.exit): `workerId`, `pid`, `exitCode`, `signalName`. */
export class DataLoaderWorkerExitedError extends Error {
  readonly code = 'ERR_TP_WORKER_EXITED';
  override name = 'DataLoaderWorkerExitedError';
  constructor(
    message: string,
    readonly workerId: number,
    readonly pid: number,
    readonly exitCode: number | null,
    readonly signalName: string | null,
  ) {
    super(message);
  }
}
/** loader.close() was called while an iteration with workers was still running. */
export class DataLoaderClosedError extends Error {
  readonly code = 'ERR_TP_DATALOADER_CLOSED';
  override name = 'DataLoaderClosedError';
}

// --- Process (Python's multiprocessing.Process) ------------------------------------------
/**
 * A Process method called in a state that does not allow it: start() twice, join() before
 * start(), close() while it runs, anything but close() after close() (Python raises
 * AssertionError or ValueError for these).
 */
export class ProcessStateError extends Error {
  readonly code = 'ERR_TP_PROCESS_STATE';
  override name = 'ProcessStateError';
}

// --- pool --------------------------------------------------------------------------------
/** A call on a Pool after close() or terminate() (CPython: ValueError "Pool not running"). */
export class PoolClosedError extends Error {
  readonly code = 'ERR_TP_POOL_CLOSED';
  override name = 'PoolClosedError';
}
/** A call that was still pending when its Pool was terminated: its tasks were stopped. */
export class PoolTerminatedError extends Error {
  readonly code = 'ERR_TP_POOL_TERMINATED';
  override name = 'PoolTerminatedError';
}
/**
 * The Pool cannot run tasks: its initializer threw (`cause`), or its workers keep dying
 * before they start. Every pending and later call rejects with it.
 */
export class PoolBrokenError extends Error {
  readonly code = 'ERR_TP_POOL_BROKEN';
  override name = 'PoolBrokenError';
}
/** Pool.join() before close() or terminate() (CPython: ValueError "Pool is still running"). */
export class PoolRunningError extends Error {
  readonly code = 'ERR_TP_POOL_RUNNING';
  override name = 'PoolRunningError';
}
/**
 * A call stopped by its AbortSignal, as Node's own APIs reject (fs, timers, events): name
 * 'AbortError', code 'ABORT_ERR' (Node's, not an ERR_TP_ code, so that code written for
 * Node's aborts recognises it), `cause` the signal's reason.
 */
export class AbortError extends Error {
  readonly code = 'ABORT_ERR';
  override name = 'AbortError';
  constructor(message = 'The operation was aborted', options?: ErrorOptions) {
    super(message, options);
  }
}

// --- sharing: descriptors --------------------------------------------------------------
/**
 * Emitted as a process warning, once, not thrown: a received file_descriptor tensor had to be
 * copied to be sent on (its descriptor was closed to stay within the open-file limit), so
 * its receiver does not share memory with its sender (NOTE [Kept descriptors]).
 */
export class ForwardCopyWarning extends Error {
  readonly code = 'ERR_TP_FORWARD_COPY';
  override name = 'ForwardCopyWarning';
}

// --- synchronization and shared values (src/sync) -----------------------------------------
/**
 * release() of a Lock nobody holds, of an RLock this thread does not hold, or a Condition's
 * wait()/notify() without holding its lock (Python's ValueError / RuntimeError there).
 */
export class NotHeldError extends Error {
  readonly code = 'ERR_TP_NOT_HELD';
  override name = 'NotHeldError';
}
/** A BoundedSemaphore released more times than it was acquired (Python's ValueError). */
export class BoundExceededError extends RangeError {
  readonly code = 'ERR_TP_BOUND_EXCEEDED';
  override name = 'BoundExceededError';
}
/**
 * JoinableQueue.taskDone() called more times than items were put (Python's ValueError
 * "task_done() called too many times").
 */
export class TaskDoneTooManyError extends RangeError {
  readonly code = 'ERR_TP_TASK_DONE_TOO_MANY';
  override name = 'TaskDoneTooManyError';
}
/** hold({timeout}) of a lock or semaphore did not get it within the timeout. */
export class LockTimeoutError extends Error {
  readonly code = 'ERR_TP_LOCK_TIMEOUT';
  override name = 'LockTimeoutError';
}
/** A blocking acquireSync() that only this very thread could satisfy: it would block for ever. */
export class WouldDeadlockError extends Error {
  readonly code = 'ERR_TP_WOULD_DEADLOCK';
  override name = 'WouldDeadlockError';
}
/** threading.BrokenBarrierError: the barrier was aborted, reset, timed out, or a party died. */
export class BrokenBarrierError extends Error {
  readonly code = 'ERR_TP_BROKEN_BARRIER';
  override name = 'BrokenBarrierError';
}
/** More threads at once than a sync object's table holds (semaphore holders, condition waiters, barrier members). */
export class SyncCapacityError extends RangeError {
  readonly code = 'ERR_TP_SYNC_CAPACITY';
  override name = 'SyncCapacityError';
}
/** A count that is not an integer in range: Semaphore(-1), Barrier(0), notify(-1), Array('i', -3). */
export class InvalidCountError extends RangeError {
  readonly code = 'ERR_TP_INVALID_COUNT';
  override name = 'InvalidCountError';
}
/**
 * Emitted as a process warning, not thrown: a lock was taken over from a holder that died
 * holding it (or a semaphore got back the units of one). What the lock protected may be
 * half-updated; `lock.ownerDied` is true after such an acquire. `tid` is the dead holder's thread.
 */
export class OwnerDiedWarning extends Error {
  readonly code = 'ERR_TP_OWNER_DIED';
  override name = 'OwnerDiedWarning';
  constructor(
    message: string,
    readonly tid: number,
  ) {
    super(message);
  }
}
// Named objects (mp.attach): see NOTE [Named objects] in src/transport/names/claim.ts.
/** `name` is already held by another live object of this user (any kind): pick another, or attach to it. */
export class NameTakenError extends Error {
  readonly code = 'ERR_TP_NAME_TAKEN';
  override name = 'NameTakenError';
}
/** mp.attach(name): nothing of that name answered within the timeout (never made, closed, or its creator died). */
export class NameNotFoundError extends Error {
  readonly code = 'ERR_TP_NAME_NOT_FOUND';
  override name = 'NameNotFoundError';
}
/** The name registry is another user's (or open to others): only the creator's own uid may attach. */
export class NameForbiddenError extends Error {
  readonly code = 'ERR_TP_NAME_FORBIDDEN';
  override name = 'NameForbiddenError';
}

// --- cluster (tensorproc/cluster, docs/cluster.md) -----------------------------------------
/**
 * A host of a cluster Pool stopped answering (its agent died, or its network is cut): the
 * tasks it held reject with this, `host` naming it; the pool goes on with the other hosts.
 */
export class HostLostError extends Error {
  readonly code = 'ERR_TP_HOST_LOST';
  override name = 'HostLostError';
  constructor(
    message: string,
    readonly host: string,
  ) {
    super(message);
  }
}
/**
 * A cluster could not be used: the NATS client packages are not installed, no server answers
 * at the URLs given, or the agents offer fewer slots than the Pool asks for.
 */
export class ClusterUnavailableError extends Error {
  readonly code = 'ERR_TP_CLUSTER_UNAVAILABLE';
  override name = 'ClusterUnavailableError';
}
