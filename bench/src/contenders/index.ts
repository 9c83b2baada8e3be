import type { Contender } from './contender.js'
import { expressRateLimitContenders } from './express-rate-limit.js'
import { fastifyRateLimitContenders } from './fastify-rate-limit.js'
import { koaRatelimitContenders } from './koa-ratelimit.js'
import { rateLimiterFlexibleContenders } from './rate-limiter-flexible.js'
import { rawEvalshaContender } from './raw-evalsha.js'
import { tollgateContenders } from './tollgate.js'

export const CONTENDERS: readonly Contender[] = [
  ...tollgateContenders,
  ...rateLimiterFlexibleContenders,
  ...expressRateLimitContenders,
  ...fastifyRateLimitContenders,
  ...koaRatelimitContenders,
  rawEvalshaContender,
]

/** The contenders that decide in the process (HybridStore's included): one decision's latency is the library's own. */
export const IN_PROCESS_CONTENDERS: readonly Contender[] = CONTENDERS.filter(
  (contender) => contender.store === 'memory',
)

export function contenderById(id: string): Contender {
  const found = CONTENDERS.find((contender) => contender.id === id)
  if (!found) throw new Error(`no contender ${id}; known: ${CONTENDERS.map((c) => c.id).join(', ')}`)
  return found
}
