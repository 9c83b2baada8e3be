// The rooms of @tollgate/core's src/ and the order they stand in: a room imports only rooms
// below it (and its own files), so that each can be read knowing only what is under it. Each
// room's README.md says what lives there. Run by `pnpm --filter @tollgate/core deps`, in CI.

/** Bottom to top; rooms on one floor do not import each other. */
const FLOORS = [
  ['support'],
  ['rules', 'identifiers', 'scripts', 'redis-clients'],
  ['algorithms'],
  ['stores'],
  ['live-rules'],
  ['store-calls'],
  ['limiter'],
  ['http', 'observe'],
]

const room = (name) => `^src/${name}/`
const above = (floor) => FLOORS.slice(floor + 1).flat()

const climbing = FLOORS.flatMap((rooms, floor) =>
  rooms.map((name) => ({
    name: `${name}-imports-up`,
    comment: `${name}/ may import only the rooms below it: ${FLOORS.slice(0, floor).flat().join(', ') || 'none'}`,
    severity: 'error',
    from: { path: room(name) },
    to: { path: `^src/(${[...above(floor), ...rooms.filter((other) => other !== name)].join('|')})/` },
  })),
)

/** A store's own folder is its own: stores share through stores/shared/ and stores/store.ts. */
const STORES = ['memory', 'redis', 'hybrid']
const storeWalls = [
  ...STORES.map((name) => ({
    name: `stores-${name}-is-its-own`,
    comment: `stores/${name}/ imports stores/shared/ and stores/store.ts, never another store's folder`,
    severity: 'error',
    from: { path: `^src/stores/${name}/` },
    to: { path: `^src/stores/(${STORES.filter((other) => other !== name).join('|')})/` },
  })),
  {
    name: 'stores-shared-below-the-stores',
    comment: 'stores/shared/ is what the stores share: it imports none of them',
    severity: 'error',
    from: { path: '^src/stores/(shared/|store\\.ts)' },
    to: { path: `^src/stores/(${STORES.join('|')})/` },
  },
]

module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      comment: 'a cycle makes two files one room: break it with a type one level down',
      severity: 'error',
      from: {},
      to: { circular: true },
    },
    {
      name: 'index-is-the-only-door',
      comment: 'nothing in src/ imports the package entry',
      severity: 'error',
      from: { pathNot: '^src/index\\.ts$' },
      to: { path: '^src/index\\.ts$' },
    },
    {
      name: 'every-file-in-a-room',
      comment: 'src/ holds rooms and index.ts only',
      severity: 'error',
      from: { path: '^src/[^/]+\\.ts$', pathNot: '^src/index\\.ts$' },
      to: {},
    },
    ...climbing,
    ...storeWalls,
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
  },
}
