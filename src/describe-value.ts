// How error messages show a caller's value. Internal: not part of the public API (src/index.ts
// exports every export of errors.ts, so it lives here).
/**
 * A caller's value as error messages show it, without calling anything of it: String() runs
 * an object's own toString/valueOf (a hostile one throws, or is not callable), and even
 * Object.prototype.toString throws on a revoked Proxy. Never throws.
 */
export function describeValue(v: unknown): string {
  try {
    if (typeof v === 'string') return JSON.stringify(v.length > 80 ? `${v.slice(0, 80)}…` : v);
    if (typeof v === 'bigint') return `${v}n`;
    if (typeof v === 'symbol') return v.toString();
    if (typeof v === 'function') return 'a function';
    if (v === null || typeof v !== 'object') return String(v);
    return Object.prototype.toString.call(v);
  } catch {
    return 'an object that cannot be read (a revoked Proxy?)';
  }
}
