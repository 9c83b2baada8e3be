import { type ClientView, MemoryStore, TollgateConfigError, type WindowOptions } from '@tollgate/core'
import { Hono } from 'hono'
import { HTTPException } from 'hono/http-exception'
import { afterEach, describe, expect, it } from 'vitest'
import { type HonoRateLimitOptions, type RateLimitMiddleware, rateLimit } from '../src/index.js'

// A whole second, so header arithmetic in seconds comes out exact.
const T = 1_700_000_000_000

const opened: RateLimitMiddleware[] = []
afterEach(async () => {
  await Promise.all(opened.splice(0).map((middleware) => middleware.close()))
})

function limitOf(options: Partial<HonoRateLimitOptions> = {}): RateLimitMiddleware {
  const middleware = rateLimit({
    store: new MemoryStore({ clock: () => T, sweepIntervalMs: 0 }),
    rule: 'api',
    windows: [{ limit: 2, period: '10s' }],
    ...options,
  })
  opened.push(middleware)
  return middleware
}

/** What Cloudflare's getConnInfo does: the platform names the client in a header of its own. */
const cloudflareConnInfo: NonNullable<HonoRateLimitOptions['getConnInfo']> = (c) => ({
  remote: { address: c.req.header('cf-connecting-ip') },
})

// `app.request` hands Hono a Web-standard Request with no bindings at all: no Node socket to read.
describe('rateLimit on Web-standard Request and Response alone', () => {
  it('counts each client by the address getConnInfo gives, and answers 429 with problem+json', async () => {
    const app = new Hono()
    app.use(limitOf({ getConnInfo: cloudflareConnInfo }))
    app.get('/', (c) => c.json({ remaining: c.get('rateLimit')?.windows[0]?.remaining }))
    const from = (address: string) => app.request('/', { headers: { 'cf-connecting-ip': address } })

    expect(await (await from('203.0.113.7')).json()).toEqual({ remaining: 1 })
    expect((await from('203.0.113.7')).status).toBe(200)
    const refused = await from('203.0.113.7')
    expect(refused.status).toBe(429)
    expect(refused.headers.get('content-type')).toBe('application/problem+json')
    expect(refused.headers.get('retry-after')).toBe('10')
    expect(refused.headers.get('ratelimit')).toBe('"api-10s";r=0;t=10')
    expect(await refused.json()).toMatchObject({ status: 429, 'violated-policies': ['api-10s'] })

    const other = await from('198.51.100.1')
    expect(other.status).toBe(200)
    expect(other.headers.get('ratelimit')).toBe('"api-10s";r=1;t=10')
  })

  it('counts requests whose runtime gives no address as one client, warning once to pass getConnInfo', async () => {
    const warnings: string[] = []
    const app = new Hono()
    app.use(limitOf({ onWarning: (_message, code) => warnings.push(code) }))
    app.get('/', (c) => c.text('ok'))

    const statuses: number[] = []
    for (let i = 0; i < 3; i++) statuses.push((await app.request('/')).status)
    expect(statuses).toEqual([200, 200, 429])
    expect(warnings).toEqual(['TG_NO_CLIENT_ADDRESS'])
  })

  it('keeps the rate limit fields on a bare Response and on an HTTPException from the handler', async () => {
    const app = new Hono()
    app.use(limitOf({ getConnInfo: cloudflareConnInfo }))
    app.get('/bare', () => new Response('bare'))
    app.get('/thrown', () => {
      throw new HTTPException(401, { message: 'who are you?' })
    })

    const bare = await app.request('/bare')
    expect(bare.headers.get('ratelimit')).toBe('"api-10s";r=1;t=10')
    const thrown = await app.request('/thrown')
    expect(thrown.status).toBe(401)
    expect(thrown.headers.get('ratelimit')).toBe('"api-10s";r=0;t=10')
  })

  it('answers a refusal with the fields of the rule that refused, under another rateLimit that let it through', async () => {
    const app = new Hono()
    app.use(limitOf({ getConnInfo: cloudflareConnInfo, rule: 'app', windows: [{ limit: 10, period: '10s' }] }))
    app.get(
      '/login',
      limitOf({ getConnInfo: cloudflareConnInfo, rule: 'login', windows: [{ limit: 1, period: '10s' }] }),
      (c) => c.text('ok'),
    )

    expect((await app.request('/login')).headers.get('ratelimit')).toBe('"login-10s";r=0;t=10')
    const refused = await app.request('/login')
    expect(refused.status).toBe(429)
    expect(refused.headers.get('ratelimit')).toBe('"login-10s";r=0;t=10')
    expect(refused.headers.get('retry-after')).toBe('10')
  })

  it('sends the bytes a refusal returns, as they are', async () => {
    const app = new Hono()
    app.use(
      limitOf({
        windows: [{ limit: 1, period: '10s' }],
        refusal: () => ({ status: 429, body: new TextEncoder().encode('slow down') }),
      }),
    )
    app.get('/', (c) => c.text('ok'))

    await app.request('/')
    const refused = await app.request('/')
    expect(refused.status).toBe(429)
    expect(refused.headers.get('content-type')).toBe('application/octet-stream')
    expect(await refused.text()).toBe('slow down')
  })
})

describe('trustProxy', () => {
  async function clientOf(trustProxy: HonoRateLimitOptions['trustProxy'], forwardedFor?: string) {
    let seen: ClientView | undefined
    const app = new Hono()
    app.use(
      limitOf({
        // The peer, as a runtime's getConnInfo would give it: the load balancer.
        getConnInfo: () => ({ remote: { address: '10.0.0.1' } }),
        ...(trustProxy === undefined ? {} : { trustProxy }),
        identify: (_c, client) => {
          seen = client
          return client.ipIdentifier
        },
        onWarning: () => {},
      }),
    )
    app.get('/', (c) => c.text('ok'))
    await app.request('/', forwardedFor === undefined ? {} : { headers: { 'x-forwarded-for': forwardedFor } })
    return seen?.ip
  }

  it('by default takes the peer for the client, whatever X-Forwarded-For says', async () => {
    expect(await clientOf(undefined, '203.0.113.7')).toBe('10.0.0.1')
  })

  it('with true, takes the first address of X-Forwarded-For', async () => {
    expect(await clientOf(true, '203.0.113.7, 198.51.100.1')).toBe('203.0.113.7')
    expect(await clientOf(true)).toBe('10.0.0.1')
  })

  it('with a function, reads from the peer leftwards to the first address it does not trust', async () => {
    const internal = (address: string) => address.startsWith('10.')
    // A client may write anything in front: only what the trusted hops appended counts.
    expect(await clientOf(internal, 'spoofed, 198.51.100.1, 10.0.0.2')).toBe('198.51.100.1')
    expect(await clientOf(internal, '10.0.0.3, 10.0.0.2')).toBe('10.0.0.3')
    expect(await clientOf((address) => address === '10.0.0.9', '203.0.113.7')).toBe('10.0.0.1')
  })
})

describe('options', () => {
  it('throws TollgateConfigError at construction for a bad trustProxy or getConnInfo', () => {
    const windows = [{ limit: 2, period: '10s' }] satisfies WindowOptions[]
    expect(() => rateLimit({ windows, trustProxy: 'yes' as never })).toThrow(
      new TollgateConfigError('option trustProxy must be a boolean or a function of an address, got "yes"'),
    )
    expect(() => rateLimit({ windows, getConnInfo: 1 as never })).toThrow(
      new TollgateConfigError('option getConnInfo must be a function, got 1'),
    )
  })

  it('names its own options among the known ones when one is misspelt', () => {
    expect(() => rateLimit({ windows: [{ limit: 2, period: '10s' }], trustProxies: true } as never)).toThrow(
      /unknown option 'trustProxies'; known options are .*'getConnInfo', 'trustProxy'/,
    )
  })
})
