import { describe, expect, it } from 'vitest'
import {
  createLimiter,
  type LimiterOptions,
  loadRules,
  type RulesOptions,
  type Store,
  type StoreRequest,
  TollgateConfigError,
  type WindowOptions,
} from '../src/index.js'

function constructionError(options: unknown): TollgateConfigError {
  try {
    void createLimiter(options as LimiterOptions).close()
  } catch (error) {
    expect(error).toBeInstanceOf(TollgateConfigError)
    expect(error).toHaveProperty('code', 'TG_CONFIG')
    return error as TollgateConfigError
  }
  throw new Error(`createLimiter accepted ${JSON.stringify(options)}`)
}

/** A 20 per minute window, then `window` as window 1 of rule 'api'. */
function withWindow(window: unknown): RulesOptions {
  return { api: { windows: [{ limit: 20, period: '60s' }, window as WindowOptions] } }
}

/** A store that records every request it is asked and answers that everything fits. */
function recordingStore() {
  const requests: StoreRequest[] = []
  const store: Store = {
    evaluate: async (request) => {
      requests.push(request)
      return {
        allowed: true,
        nowMs: 1_000,
        windows: request.targets.flatMap((target) =>
          target.windows.map(() => ({ remaining: 1, resetAtMs: 1_000, fitsAtMs: 1_000 })),
        ),
      }
    },
    reset: async () => {},
    close: async () => {},
  }
  return { store, requests }
}

describe('lowBurst', () => {
  it.each([
    ['-1', -1, 'got -1'],
    ['1.5', 1.5, 'got 1.5'],
    ['the limit', 5, 'got 5'],
    ['above the limit', 6, 'got 6'],
    ['NaN', Number.NaN, 'got NaN'],
    ['Infinity', Number.POSITIVE_INFINITY, 'got Infinity'],
    ["'2'", '2', 'got "2"'],
    ['null', null, 'got null'],
  ])('refuses lowBurst %s, naming the rule, the window and the value', (_, lowBurst, shown) => {
    const { message } = constructionError({ rules: withWindow({ limit: 5, period: '3s', lowBurst }) })
    expect(message).toContain("rule 'api', window 1: lowBurst must be an integer from 0 to 4 (below the limit, 5)")
    expect(message).toContain(shown)
  })

  it('accepts 0 and the limit less one, and keeps them on the resolved window', async () => {
    const limiter = createLimiter({
      rules: {
        low: { windows: [{ limit: 5, period: '3s', lowBurst: 0 }] },
        high: { windows: [{ limit: 5, period: '3s', lowBurst: 4 }] },
      },
    })
    expect(limiter.rules.get('low')?.windows).toEqual([{ limit: 5, periodMs: 3_000, lowBurst: 0 }])
    expect(limiter.rules.get('high')?.windows).toEqual([{ limit: 5, periodMs: 3_000, lowBurst: 4 }])
    await limiter.close()
  })

  it('comes from a rules file, where createLimiter checks it and names the rule and window', async () => {
    const rules = loadRules(
      'limits:\n  - name: search\n    config:\n      - { limit: 100, period: 60, lowBurst: 50 }\n      - { limit: 10, period: 1 }\n',
    )
    expect(rules).toEqual({
      search: {
        windows: [
          { limit: 100, period: '60s', lowBurst: 50 },
          { limit: 10, period: '1s' },
        ],
      },
    })
    const limiter = createLimiter({ rules, onWarning: () => {} })
    expect(limiter.rules.get('search')?.windows[0]).toEqual({ limit: 100, periodMs: 60_000, lowBurst: 50 })
    await limiter.close()
    const bad = loadRules('{"limits":[{"name":"search","config":[{"limit":100,"period":60,"lowBurst":100}]}]}')
    expect(constructionError({ rules: bad }).message).toContain(
      "rule 'search', window 0: lowBurst must be an integer from 0 to 99 (below the limit, 100), got 100",
    )
  })
})

describe('random', () => {
  it.each([
    ['a number', 0.5, 'got 0.5'],
    ['a string', 'Math.random', 'got "Math.random"'],
    ['null', null, 'got null'],
  ])('refuses %s at construction', (_, random, shown) => {
    const { message } = constructionError({ rules: withWindow({ limit: 5, period: '3s' }), random })
    expect(message).toContain('createLimiter option random must be a function returning a number in [0, 1)')
    expect(message).toContain(shown)
  })

  it.each([
    ['1', 1, 'returned 1;'],
    ['-0.1', -0.1, 'returned -0.1;'],
    ['NaN', Number.NaN, 'returned NaN;'],
    ["'0.5'", '0.5', 'returned "0.5";'],
  ])('fails the decision it was called for when it returns %s, asking the store nothing', async (_, value, shown) => {
    const { store, requests } = recordingStore()
    const limiter = createLimiter({
      store,
      rules: { api: { windows: [{ limit: 5, period: '3s', lowBurst: 2 }] } },
      random: () => value as number,
    })
    for (const operation of ['consume', 'peek'] as const) {
      const error = await limiter[operation]('api', 'ip:a').then(
        () => undefined,
        (failure: unknown) => failure,
      )
      expect(error).toBeInstanceOf(TollgateConfigError)
      expect(String(error)).toContain(`createLimiter option random ${shown} it must return a number from 0`)
    }
    expect(requests).toEqual([])
    await limiter.close()
  })

  it('sends a store exactly the request it always got when no window has lowBurst', async () => {
    const { store, requests } = recordingStore()
    let drawn = 0
    const limiter = createLimiter({
      store,
      rules: { api: { windows: [{ limit: 5, period: '3s' }] } },
      random: () => {
        drawn++
        return 0.5
      },
    })
    await limiter.consume('api', ['ip:a', 'user:1'])
    await limiter.peek('api', 'ip:a')
    await limiter.refund('api', 'ip:a')
    expect(drawn).toBe(0)
    expect(requests.map((request) => Object.keys(request))).toEqual([
      ['operation', 'targets', 'cost'],
      ['operation', 'targets', 'cost'],
      ['operation', 'targets', 'cost'],
    ])
    await limiter.close()
  })

  it('sends the one number it drew with a consume or peek that may shed, never with a refund', async () => {
    const { store, requests } = recordingStore()
    const draws = [0.25, 0.75]
    const limiter = createLimiter({
      store,
      rules: {
        child: { windows: [{ limit: 5, period: '3s' }], parent: 'root' },
        root: { windows: [{ limit: 50, period: '1m', lowBurst: 10 }] },
      },
      random: () => draws.shift() as number,
    })
    await limiter.consume('child', ['ip:a', 'user:1'])
    await limiter.peek('child', 'ip:a')
    await limiter.refund('child', 'ip:a')
    expect(requests.map((request) => [request.operation, request.random])).toEqual([
      ['consume', 0.25],
      ['peek', 0.75],
      ['refund', undefined],
    ])
    expect(draws).toEqual([])
    await limiter.close()
  })

  it('sheds on the local fallback with the same number, drawing no other', async () => {
    let drawn = 0
    const failing: Store = {
      evaluate: () => Promise.reject(new Error('connect ECONNREFUSED 127.0.0.1:6379')),
      reset: async () => {},
      close: async () => {},
    }
    const limiter = createLimiter({
      store: failing,
      rules: { api: { windows: [{ limit: 5, period: '3s', lowBurst: 0 }] } },
      onStoreError: 'local',
      random: () => {
        drawn++
        return 0
      },
    })
    limiter.on('store-error', () => {})
    // lowBurst 0: a request of 1 leaves a use of 1, p = 1 / 5, and 0 is below it.
    const decision = await limiter.consume('api', 'ip:a')
    expect(decision).toMatchObject({ allowed: false, reason: 'local-fallback' })
    expect(decision.windows[0]).toMatchObject({ remaining: 5, failed: true })
    expect(drawn).toBe(1)
    await limiter.close()
  })
})
