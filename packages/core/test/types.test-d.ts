import type { Cluster, Redis } from 'ioredis'
import { expectTypeOf } from 'vitest'
import {
  type ClientView,
  createLimiter,
  type Duration,
  type Limiter,
  LiveRules,
  type LiveRulesClient,
  loadRules,
  MemoryStore,
  type RateLimitOptions,
  type RulesOptions,
  type WindowOptions,
} from '../src/index.js'
import { optionKeys } from '../src/support/option-objects.js'

interface Req {
  user: { id: number }
}

// Type-checked by tsc, never run.
// Regression: the documented identify example did not compile, client.ipIdentifier being
// `string | undefined` and the array `(string | undefined)[]`.
export const documented: RateLimitOptions<Req> = {
  windows: [{ limit: 100, period: '1m' }],
  identify: (req, client) => [client.ipIdentifier, `user:${req.user.id}`],
}

export const ipIdentifier = (client: ClientView): string => client.ipIdentifier

// Rule names: a limiter made from a literal rules object takes only its names.
const typed = createLimiter({
  rules: {
    api: { windows: [{ limit: 100, period: '1 minute' }] },
    'auth.login': { windows: [{ limit: 5, period: '15 minutes' }], parent: 'api', dryRun: true },
  },
})

export async function ruleNames(): Promise<void> {
  await typed.consume('api', 'ip:203.0.113.7')
  await typed.peek('auth.login', ['ip:203.0.113.7', 'user:42'])
  // @ts-expect-error a misspelt rule name
  await typed.consume('apii', 'ip:203.0.113.7')
  // @ts-expect-error peek too
  await typed.peek('auth.logn', 'ip:203.0.113.7')
  // @ts-expect-error refund too
  await typed.refund('login', 'ip:203.0.113.7')
  // @ts-expect-error reset too
  await typed.reset('ap', 'ip:203.0.113.7')
  // @ts-expect-error wait too
  await typed.wait('api.login', 'ip:203.0.113.7', { maxWaitMs: 1000 })
  // @ts-expect-error a wait's options are checked as a decision's are
  await typed.wait('api', 'ip:203.0.113.7', { maxWait: 1000 })
  expectTypeOf(typed.consume).parameter(0).toEqualTypeOf<'api' | 'auth.login'>()
}

// Rules declared apart keep their names when declared with `satisfies`.
const declared = { api: { windows: [{ limit: 100, period: '1m' }] } } satisfies RulesOptions
export async function declaredNames(): Promise<void> {
  const limiter = createLimiter({ rules: declared })
  await limiter.consume('api', 'ip:203.0.113.7')
  // @ts-expect-error not one of the declared names
  await limiter.consume('api.write', 'ip:203.0.113.7')
}

// Code that keeps a Limiter, or a rule name in a string, still compiles.
export const stored: Limiter = typed
export const storedTyped: Limiter<'api' | 'auth.login'> = createLimiter({ rules: loadRules('rules.yaml') })

export async function loaded(name: string): Promise<void> {
  const limiter = createLimiter({ rules: loadRules('rules.yaml') })
  expectTypeOf(limiter).toEqualTypeOf<Limiter>()
  await limiter.consume(name, 'ip:203.0.113.7')
  await stored.consume(name, 'ip:203.0.113.7')
  const annotated: RulesOptions = { api: { windows: [{ limit: 1, period: '1s' }] } }
  await createLimiter({ rules: annotated }).consume(name, 'ip:203.0.113.7')
}

// Periods: what parseDuration reads, and not what it refuses.
export const periods: WindowOptions['period'][] = [
  60_000,
  '500ms',
  '3s',
  '1.5m',
  '1h',
  '1d',
  '15 minutes',
  '15minutes',
  '1 minute',
  '2 min',
  '10 sec',
  '30 seconds',
  '250 milliseconds',
  '3 hr',
  '1 hour',
  '2 hours',
  '1 day',
  '7 days',
  '15 Minutes',
  '15 MINUTES',
]
// @ts-expect-error a misspelt unit
export const misspelt: Duration = '15 minuets'
// @ts-expect-error weeks are no unit
export const weeks: Duration = '2 weeks'
// @ts-expect-error a number alone is not a string duration
export const bare: Duration = '60'
// @ts-expect-error nor is a unit alone
export const unitOnly: Duration = 'minute'

export const rulePeriod = createLimiter({
  // @ts-expect-error a typo in a period of a literal rules object
  rules: { api: { windows: [{ limit: 1, period: '1 minut' }] } },
})

// Options lists checked against their types.
interface Sample {
  a?: number
  b: string
}
export const sampleKeys = optionKeys<Sample>({ a: true, b: true })
// @ts-expect-error an option of the type left out of its list
export const missing = optionKeys<Sample>({ a: true })
// @ts-expect-error a key listed that the type does not have
export const unknownKey = optionKeys<Sample>({ a: true, b: true, c: true })

// Live rules: ioredis clients are what they take, and a limiter on them takes any rule name.
export function liveRules(redis: Redis, cluster: Cluster): void {
  const standalone: LiveRulesClient = redis
  const clustered: LiveRulesClient = cluster
  const rules = new LiveRules({ client: standalone, defaults: { api: { windows: [{ limit: 100, period: '1m' }] } } })
  const limiter = createLimiter({ rules, store: new MemoryStore() })
  expectTypeOf(limiter).toEqualTypeOf<Limiter>()
  void limiter.consume('published.later', 'ip:203.0.113.7')
  void new LiveRules({ client: clustered, defaults: loadRules('rules.yaml'), prefix: 'app:', nudges: false })
  void rules.publish({ api: null, search: { windows: [{ limit: 5, period: '1m' }], parent: 'api' } })
  void rules.publish(loadRules('rules.yaml'), { expectedEpoch: rules.epoch })
  // @ts-expect-error a rule's options, or null: nothing else
  void rules.publish({ api: 5 })
  const rateLimit: RateLimitOptions<Req> = { rules, rule: 'api' }
  void rateLimit
}
