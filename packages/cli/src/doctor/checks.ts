import type { Check } from './check.js'
import { clock } from './clock.js'
import { cluster } from './cluster.js'
import { hybrid } from './hybrid.js'
import { liveRules } from './live-rules.js'
import { scripts } from './scripts.js'
import { version } from './version.js'

/** `tollgate doctor`'s checks, in the order they print, after the connection's. */
export const CHECKS: readonly Check[] = [version, scripts, clock, cluster, liveRules, hybrid]
