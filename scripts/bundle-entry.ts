// The package bundle's entry (NOTE [The package bundle], scripts/bundle-library.mjs): the
// public API, and what the bundle's stub files take from it (src/programs/bundle-held.ts).
// A build input, not a module of the library: nothing under src/ imports the index.
export * from '../src/index.js';
// Again here: errors.js stays a file of its own, and esbuild keeps `export *` of such a file
// only in the entry itself (index.ts's own line is dropped from the bundle).
export * from '../src/errors.js';
import '../src/programs/bundle-held.js';
