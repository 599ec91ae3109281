// The command line's own errors: not the library's API (src/errors.ts), coded the same way.
/** A bench program (the runner, a workload's anchor) is not in this installation. */
export class BenchNotInstalledError extends Error {
  readonly code = 'ERR_TP_BENCH_NOT_INSTALLED';
  override name = 'BenchNotInstalledError';
}
