// The bench's own errors (`tensorproc bench`): coded like the library's (ERR_TP_*), but not
// part of its API, so they live with the bench. The CLI tells them by their code.
/** `bench --only` names a workload the runner does not have; `workloads` are those it has. */
export class UnknownWorkloadError extends TypeError {
  readonly code = 'ERR_TP_UNKNOWN_WORKLOAD';
  override name = 'UnknownWorkloadError';
  constructor(
    readonly ids: string[],
    readonly workloads: string[],
  ) {
    super(`no workload named ${ids.join(', ')} (have: ${workloads.join(', ')})`);
  }
}
/** `bench --plot` draws W1, which this run does not measure (left out by --only, or not built). */
export class PlotNeedsW1Error extends Error {
  readonly code = 'ERR_TP_PLOT_NEEDS_W1';
  override name = 'PlotNeedsW1Error';
  constructor(message = '--plot draws W1, which this run does not measure: add W1 to --only') {
    super(message);
  }
}
/** `bench --plot` needs the charting libraries (devDependencies), or a file it can write. */
export class PlotUnavailableError extends Error {
  readonly code = 'ERR_TP_PLOT_UNAVAILABLE';
  override name = 'PlotUnavailableError';
}
