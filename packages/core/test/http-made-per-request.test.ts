import { afterEach, describe, expect, it, vi } from 'vitest'
import type { RateLimit, RequestView } from '../src/http/rate-limit.js'
import type { RateLimitOptions } from '../src/http/rate-limit-options.js'
import type { WindowOptions } from '../src/rules/rules.js'
import { MemoryStore } from '../src/stores/memory/memory-store.js'

interface Req {
  id: number
}

const WINDOWS: readonly WindowOptions[] = [{ limit: 100, period: '1m' }]

let store: MemoryStore
afterEach(async () => {
  await store.close()
})

/** The engine and limiter modules as a new process has them: the process warns once. */
async function newProcess() {
  vi.resetModules()
  store = new MemoryStore({ sweepIntervalMs: 0 })
  const { createRateLimit } = await import('../src/http/rate-limit.js')
  const { createLimiter } = await import('../src/limiter/limiter.js')
  const warnings: Array<{ message: string; code: string }> = []
  const onWarning = (message: string, code: string) => warnings.push({ message, code })
  const engine = (options: Partial<RateLimitOptions<Req>>): RateLimit<Req> =>
    createRateLimit<Req>({
      onWarning,
      ...(options.limiter ? {} : { store }),
      ...(options.limiter || options.rules ? {} : { windows: WINDOWS }),
      ...options,
    })
  return { engine, createLimiter, warnings }
}

const view: RequestView = { ip: '203.0.113.7', forwardedFor: undefined, proxyTrusted: false }

/** What passes between two requests a server receives: a task of the event loop, not time. */
const nextTask = () => new Promise<void>((resolve) => setTimeout(resolve, 0))

describe('a middleware made for each request', () => {
  it.each<[string, (made: Awaited<ReturnType<typeof newProcess>>) => Partial<RateLimitOptions<Req>>]>([
    ['inline windows', () => ({})],
    ['a rule of rules', () => ({ rules: { api: { windows: WINDOWS } }, rule: 'api' })],
    [
      'a limiter given and a rule function',
      ({ createLimiter }) => {
        const limiter = createLimiter({ store, rules: { api: { windows: WINDOWS } } })
        return { limiter, rule: () => 'api' }
      },
    ],
  ])('warns once, at the second request, to make it once (%s)', async (_, optionsOf) => {
    const made = await newProcess()
    const options = optionsOf(made)
    const warnedAt: number[] = []
    for (let id = 1; id <= 4; id++) {
      // As `app.use((req, res, next) => rateLimit(options)(req, res, next))` does: options a new object each time.
      await made.engine({ ...options }).check({ id }, view)
      warnedAt.push(made.warnings.length)
      await nextTask()
    }
    expect(warnedAt).toEqual([0, 1, 1, 1])
    expect(made.warnings).toEqual([
      {
        code: 'TG_LIMITER_PER_REQUEST',
        message: expect.stringContaining('make the middleware once, as the app starts'),
      },
    ])
  })

  it('warns of middlewares of several rules made for each request, each request passing all of them', async () => {
    const { engine, warnings } = await newProcess()
    for (let id = 1; id <= 3; id++) {
      const request = { id }
      await engine({ rule: 'app' }).check(request, view)
      await engine({ rule: 'login', windows: [{ limit: 5, period: '1m' }] }).check(request, view)
      await nextTask()
    }
    expect(warnings.map(({ code }) => code)).toEqual(['TG_LIMITER_PER_REQUEST'])
  })

  it('is left unwatched by ignoreWarnings naming its code', async () => {
    const { engine, warnings } = await newProcess()
    for (let id = 1; id <= 3; id++) {
      await engine({ ignoreWarnings: ['TG_LIMITER_PER_REQUEST'] }).check({ id }, view)
      await nextTask()
    }
    expect(warnings).toEqual([])
  })
})

describe('middlewares made otherwise never warn', () => {
  it('made once and sent a request at once, as a test of an app does, then many more', async () => {
    const { engine, warnings } = await newProcess()
    const limit = engine({})
    for (let id = 1; id <= 4; id++) {
      await limit.check({ id }, view)
      await nextTask()
    }
    expect(warnings).toEqual([])
  })

  it('made lazily, on the first request of their route, each then used again', async () => {
    const { engine, warnings } = await newProcess()
    const lazy = new Map<string, RateLimit<Req>>()
    const route = (rule: string) => {
      let limit = lazy.get(rule)
      if (limit === undefined) {
        limit = engine({ rule })
        lazy.set(rule, limit)
      }
      return limit
    }
    for (let id = 1; id <= 6; id++) {
      await route(id % 2 === 0 ? 'search' : 'upload').check({ id }, view)
      await nextTask()
    }
    expect(warnings).toEqual([])
  })

  it('made and sent a request each, one after another in a loop, as a test of several cases does', async () => {
    const { engine, warnings } = await newProcess()
    for (let id = 1; id <= 4; id++) await engine({}).check({ id }, view)
    expect(warnings).toEqual([])
  })

  it('made for one request each and closed after it, as a test per app does', async () => {
    const { engine, warnings } = await newProcess()
    for (let id = 1; id <= 4; id++) {
      const limit = engine({})
      await limit.check({ id }, view)
      await limit.close()
      await nextTask()
    }
    expect(warnings).toEqual([])
  })

  it('two of one rule made, then both sent the same first request, as an app-wide and a route middleware are', async () => {
    const { engine, warnings } = await newProcess()
    const [app, route] = [engine({ rule: 'api' }), engine({ rule: 'api' })]
    for (let id = 1; id <= 3; id++) {
      await app.check({ id }, view)
      await route.check({ id }, view)
      await nextTask()
    }
    expect(warnings).toEqual([])
  })
})
