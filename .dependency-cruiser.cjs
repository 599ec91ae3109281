// The import graph's rules (docs/design.md, "Layers"), checked by `npm test` (npm run
// lint:imports). Each floor of src/ imports only from floors below it; no cycle among files,
// type-only imports included; nothing under src/ imports the index; nothing outside src/cluster/
// imports the NATS client (node_modules stay in the graph as leaves, unfollowed, for that rule).
/** Folders (or ground files) of src/, floor by floor, bottom first. */
const FLOORS = [
  ['(errors|env|exit-hooks|debug|describe-value|arguments|event-loop)\\.ts'],
  ['native/'],
  ['tensor/'],
  ['sharing/'],
  ['cuda/'],
  ['transport/', 'manager/'],
  ['process/', 'queue/', 'sync/'],
  ['workers/'],
  ['pool/', 'data/', 'sync-manager/'],
  ['index\\.ts'],
  ['cluster/'],
  ['cli/', 'programs/'],
];
const path = (parts) => `^src/(${parts.join('|')})`;

/** An import from a room to a room of its own floor or above (siblings do not import each other). */
const upward = FLOORS.flatMap((floor, k) =>
  floor.map((room) => ({
    name: 'no-import-up',
    comment: `src/${room.replace(/\\\\/g, '')} imports only from the floors below it (docs/design.md)`,
    severity: 'error',
    from: { path: path([room]) },
    to: {
      path: path(
        FLOORS.slice(k)
          .flat()
          .filter((r) => r !== room),
      ),
    },
  })),
);

module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      comment: 'No import cycle among files, type-only imports included.',
      severity: 'error',
      from: {},
      to: { circular: true },
    },
    {
      name: 'no-index-import',
      comment: 'src/index.ts is the public face: a list of exports that nothing under src/ imports.',
      severity: 'error',
      from: { path: '^src/', pathNot: '^src/cluster/' },
      to: { path: '^src/index\\.ts$' },
    },
    {
      name: 'nats-only-in-cluster',
      comment:
        'The NATS client is a dependency of tensorproc/cluster only (docs/cluster.md): the core, and the core bundle, never import it.',
      severity: 'error',
      from: { path: '^src/', pathNot: '^src/cluster/' },
      to: { path: '@nats-io/' },
    },
    ...upward,
  ],
  options: {
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '^dist/' },
  },
};
