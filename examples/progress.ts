// A progress bar (cli-progress) on a terminal; elsewhere (output piped to a file or a CI log)
// no bar, whose redraws would only garble the log, and lines printed as they come.
import cliProgress from 'cli-progress';

export interface Progress {
  increment(payload?: Record<string, string>): void;
  /** A line above the bar (or just the line, without one). */
  log(line: string): void;
  stop(): void;
}

export function progress(format: string, total: number, payload: Record<string, string> = {}): Progress {
  if (!process.stderr.isTTY) {
    return { increment() {}, log: (line) => console.log(line), stop() {} };
  }
  const bars = new cliProgress.MultiBar({ format, hideCursor: true, clearOnComplete: false }, cliProgress.Presets.shades_classic);
  const bar = bars.create(total, 0, payload);
  return {
    increment: (payload) => bar.increment(1, payload ?? {}),
    log: (line) => bars.log(`${line}\n`),
    stop: () => bars.stop(),
  };
}
