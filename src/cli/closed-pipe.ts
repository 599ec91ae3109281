// NOTE [Closed pipe]: `tensorproc --help | head -1`, `tensorproc bench --json | head -3`.
//
// A reader that has what it wants closes the pipe, and the next write gets EPIPE. Node
// reports it as an 'error' event on process.stdout (or stderr) and, with nobody listening,
// dies of it with a stack trace (commander writes the help with a plain stream.write). A Unix
// tool in that spot stops quietly: the output has gone where it was asked to, as far as the
// reader wanted it. So the command line stops at once, with the status it had so far (0 for
// the help; 1 for a doctor that had already found a failed check), and says nothing: the one
// stream to say it on is the one that is closed, or would mix into the reader's output.
// Whatever it had started stops with it: the bench's workload programs, each with what it
// started (tensorproc's children, the anchors and theirs), are ended as process groups by the
// runner's exit hook and the workload's SIGTERM handler (NOTE [Ending what the bench started],
// bench/lib/programs.ts).

/** Makes EPIPE on stdout or stderr end the process quietly; other stream errors stay fatal. */
export function exitQuietlyOnClosedPipe(): void {
  for (const stream of [process.stdout, process.stderr]) {
    stream.on('error', (e: NodeJS.ErrnoException) => {
      if (e.code !== 'EPIPE') throw e;
      process.exit(typeof process.exitCode === 'number' ? process.exitCode : 0);
    });
  }
}
