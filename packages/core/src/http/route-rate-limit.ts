import { viewsStateOf } from '../limiter/rule-name-clash.js'
import { ANSWERS_INTO, type AnswersInto, answersIntoOf } from '../stores/shared/answers-into.js'
import type { Store } from '../stores/store.js'
import { TollgateConfigError } from '../support/errors.js'
import { MIDDLEWARE_FOREIGN_OPTIONS } from '../support/foreign-options.js'
import { checkOptionsObject } from '../support/option-objects.js'
import { knownOptions } from './engine-config.js'
import { createRateLimit, type RateLimit } from './rate-limit.js'
import type { RateLimitOptions } from './rate-limit-options.js'
import { routeRuleName } from './rule-names.js'

const LIMITER_SOURCES = ['limiter', 'rules', 'windows', 'algorithm', 'rule', 'store'] as const

/**
 * The engine for one route of an app whose limit is `base`: the route's options override the
 * app's. A route naming only a `rule` decides with the app's limiter; a route with `windows` or
 * `rules` of its own gets a limiter of its own on the app's store (shared, never closed by the
 * route). `routeId` names a route's inline windows, e.g. `POST /upload`, so that every route's
 * keys differ and stay the same across restarts. When the app limits no route by itself, `base`
 * may be its options rather than an engine; each route then brings its own rule. A route id past
 * the bound on rule names is shortened to its start and a digest. `adapterOptions` is as for
 * `createRateLimit`.
 */
export function createRouteRateLimit<Req>(
  base: RateLimit<Req> | Partial<RateLimitOptions<Req>>,
  route: Partial<RateLimitOptions<Req>>,
  routeId?: string,
  adapterOptions: readonly string[] = [],
): RateLimit<Req> {
  const raw: unknown = route
  checkOptionsObject(raw, knownOptions(adapterOptions), 'route rate limit options', {
    foreign: MIDDLEWARE_FOREIGN_OPTIONS,
  })
  const engine = isEngine(base) ? base : undefined
  const inherited: Partial<RateLimitOptions<Req>> = { ...(engine ? engine.options : base) }
  for (const key of LIMITER_SOURCES) delete inherited[key]
  if (route.limiter) return createRateLimit({ ...inherited, ...route })
  if (route.windows || route.rules || !engine) {
    const rule = route.rule ?? (route.windows && routeId !== undefined ? routeRuleName(routeId) : undefined)
    if (route.windows && rule === undefined) {
      throw new TollgateConfigError(
        'a route with windows of its own needs option rule: a name that keeps its keys apart from other routes',
      )
    }
    const store = engine ? engine.limiter.store : (base as Partial<RateLimitOptions<Req>>).store
    return createRateLimit({ ...inherited, ...(store ? { store: sharedStore(store) } : {}), ...route, rule })
  }
  return createRateLimit({ ...inherited, limiter: engine.limiter, rule: engine.rule, ...route })
}

function isEngine<Req>(base: RateLimit<Req> | Partial<RateLimitOptions<Req>>): base is RateLimit<Req> {
  return typeof (base as RateLimit<Req>).check === 'function'
}

/** The app's store for a route's own limiter: closing the route must not close the app's store. */
function sharedStore(store: Store): Store {
  const shared: Store = {
    evaluate: (request) => store.evaluate(request),
    reset: (targets) => store.reset(targets),
    close: () => Promise.resolve(),
  }
  const evaluateSync = store.evaluateSync?.bind(store)
  if (evaluateSync) shared.evaluateSync = evaluateSync
  const answerInto = answersIntoOf(store)
  if (answerInto) (shared as Store & AnswersInto)[ANSWERS_INTO] = answerInto
  const recentError = store.recentError?.bind(store)
  if (recentError) shared.recentError = recentError
  // Its rules share the app's keys: a rule of the app's name with other limits clashes there.
  viewsStateOf(shared, store)
  return shared
}
