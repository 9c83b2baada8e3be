export type { AdminHandler } from './admin-handler.js'
export { adminHandler } from './admin-handler.js'
export type { AdminServer } from './admin-server.js'
export { startAdminServer } from './admin-server.js'
export type {
  AdminSnapshot,
  HybridView,
  ProcessView,
  RefusalsView,
  SecondView,
  TopOffenderView,
} from './fleet-snapshot.js'
export type { AdminStaleness } from './live-stream.js'
export type { AdminClient, AdminOptions, AdminServerOptions } from './options.js'
export type { RulesView } from './rules-in-force.js'
