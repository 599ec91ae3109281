// Refusing arguments a public method does not take. JavaScript drops extra arguments
// silently, so `conn.recv('x')` (a caller who meant a timeout) would wait for ever on an empty
// pipe: every public method checks its count and names what it did not take.
import { InvalidArgumentError } from './errors.js';
import { describeValue } from './describe-value.js';

/** The error for `args` past the first `max`, or null when there are none. */
export function extraArgumentsError(method: string, args: ArrayLike<unknown>, max: number): InvalidArgumentError | null {
  if (args.length <= max) return null;
  const extra: string[] = [];
  for (let i = max; i < args.length && i < max + 4; i++) extra.push(describeValue(args[i]));
  if (args.length > max + 4) extra.push('…');
  const takes = max === 0 ? 'takes no arguments' : `takes at most ${max} argument${max === 1 ? '' : 's'}`;
  return new InvalidArgumentError(`${method} ${takes} (got ${args.length}; not taken: ${extra.join(', ')}).`);
}

/** Throws InvalidArgumentError when `args` has more than `max` entries. */
export function checkArgCount(method: string, args: ArrayLike<unknown>, max: number): void {
  const e = extraArgumentsError(method, args, max);
  if (e !== null) throw e;
}
