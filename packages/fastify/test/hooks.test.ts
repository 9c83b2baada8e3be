import type { FastifyRequest } from 'fastify'
import { describe, expect, it, vi } from 'vitest'
import { appWith } from './app.js'

type SignedIn = FastifyRequest & { user?: string }

/** Counts each signed-in user on their own and reports what identify saw. */
function byUser(seen: Array<string | undefined>) {
  return (request: FastifyRequest) => {
    const user = (request as SignedIn).user
    seen.push(user)
    return `user:${user ?? 'anonymous'}`
  }
}

/** Stands in for an auth hook: it runs in preHandler, after the body is parsed. */
function signIn(request: FastifyRequest) {
  ;(request as SignedIn).user = String(request.headers['x-user'])
}

describe('the hook that checks', () => {
  it("with 'preHandler', lets identify read the user an earlier preHandler hook set", async () => {
    const seen: Array<string | undefined> = []
    const app = await appWith({ windows: [{ limit: 1, period: '10s' }], identify: byUser(seen), hook: 'preHandler' })
    app.addHook('preHandler', async (request) => signIn(request))
    app.get('/', async () => ({ ok: true }))

    const ada = await app.inject({ url: '/', headers: { 'x-user': 'ada' } })
    const bob = await app.inject({ url: '/', headers: { 'x-user': 'bob' } })
    const adaAgain = await app.inject({ url: '/', headers: { 'x-user': 'ada' } })
    expect([ada.statusCode, bob.statusCode, adaAgain.statusCode]).toEqual([200, 200, 429])
    expect(seen).toEqual(['ada', 'bob', 'ada'])
  })

  it("with the default 'onRequest', runs before such hooks", async () => {
    const seen: Array<string | undefined> = []
    const app = await appWith({ windows: [{ limit: 5, period: '10s' }], identify: byUser(seen) })
    app.addHook('preHandler', async (request) => signIn(request))
    app.get('/', async () => ({ ok: true }))

    await app.inject({ url: '/', headers: { 'x-user': 'ada' } })
    expect(seen).toEqual([undefined])
  })

  it("set on a route, overrides the plugin's", async () => {
    const seen: Array<string | undefined> = []
    const app = await appWith({ windows: [{ limit: 5, period: '10s' }], identify: byUser(seen) })
    app.addHook('preHandler', async (request) => signIn(request))
    app.get('/me', { config: { rateLimit: { hook: 'preHandler' } } }, async () => ({ ok: true }))
    app.get('/', async () => ({ ok: true }))

    await app.inject({ url: '/me', headers: { 'x-user': 'ada' } })
    await app.inject({ url: '/', headers: { 'x-user': 'ada' } })
    expect(seen).toEqual(['ada', undefined])
  })

  it("with 'preHandler', refuses before the handler runs", async () => {
    const handler = vi.fn(async () => ({ ok: true }))
    const app = await appWith({ windows: [{ limit: 1, period: '10s' }], hook: 'preHandler' })
    app.post('/', handler)

    await app.inject({ method: 'POST', url: '/', payload: { a: 1 } })
    const refused = await app.inject({ method: 'POST', url: '/', payload: { a: 1 } })
    expect(refused.statusCode).toBe(429)
    expect(handler).toHaveBeenCalledTimes(1)
  })

  it('hands a request decided in the process on in the same turn; one with an async identify once it settles', async () => {
    for (const [identify, sameTurn] of [
      [undefined, true],
      [async () => 'user:1', false],
    ] as const) {
      const app = await appWith({ windows: [{ limit: 2, period: '10s' }], ...(identify ? { identify } : {}) })
      // App hooks run before the plugin's, which it adds to each route: a turn of the microtask
      // queue between this one and the handler sets `ended`.
      app.addHook('onRequest', (request, _reply, done) => {
        const turn = { ended: false }
        ;(request as FastifyRequest & { turn?: typeof turn }).turn = turn
        queueMicrotask(() => {
          turn.ended = true
        })
        done()
      })
      app.get('/', (request) => ({
        sameTurn: !(request as FastifyRequest & { turn: { ended: boolean } }).turn.ended,
        remaining: request.rateLimit?.windows[0]?.remaining,
      }))
      const response = await app.inject({ url: '/' })
      expect(response.json()).toEqual({ sameTurn, remaining: 1 })
    }
  })
})
