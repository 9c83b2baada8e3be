import { randomUUID } from 'node:crypto'
import { byIpAndUser, type ClientView, type Limiter, userIdentifier } from '@tollgate/core'
import { rateLimit } from '@tollgate/hono'
import { type Context, Hono, type MiddlewareHandler } from 'hono'

export interface AppOptions {
  /** Made from `rules.ts`; the app never closes it. */
  limiter: Limiter
}

export function createApp({ limiter }: AppOptions): Hono {
  const app = new Hono()

  app.get('/health', (c) => c.json({ ok: true }))

  app.post(
    '/login',
    rateLimit({ limiter, rule: 'auth.createToken', identify: byIpAndUser(usernameOf) }),
    // A real app checks the password here; every attempt has been counted, right or wrong.
    async (c) => c.json({ token: `fake-${(await usernameOf(c)) ?? 'anonymous'}-${randomUUID()}` }),
  )

  app.get('/api/items', rateLimit({ limiter, rule: 'api.read', identify: userOrAddress }), (c) =>
    c.json({ items: [{ id: 1, name: 'first' }] }),
  )

  app.post(
    '/upload',
    requireContentLength,
    rateLimit({
      limiter,
      rule: 'upload.bytes',
      identify: userOrAddress,
      cost: contentLength,
      quotaUnit: 'content-bytes',
    }),
    async (c) => c.json({ received: (await c.req.arrayBuffer()).byteLength }),
  )

  return app
}

// Hono keeps the parsed body, so the limiter and the handler both read it. A username that is not
// a string (an object, a float) would make an invalid identifier.
async function usernameOf(c: Context): Promise<string | undefined> {
  const body: unknown = await c.req.json().catch(() => undefined)
  const username = (body as { username?: unknown } | undefined)?.username
  return typeof username === 'string' ? username : undefined
}

// The header stands in for a real session or token: anyone can send it.
function userOrAddress(c: Context, client: ClientView): string {
  const id = c.req.header('x-user-id')
  return id ? userIdentifier(id) : client.ipIdentifier
}

// The byte quota is charged before the body arrives, by the length it declares, and Node stops a
// body at that length. A chunked upload declares none and would cost nothing: it is refused.
const requireContentLength: MiddlewareHandler = async (c, next) => {
  if (c.req.header('content-length') !== undefined) return next()
  return c.json(
    {
      type: 'about:blank',
      title: 'Length Required',
      status: 411,
      detail: 'An upload must declare its Content-Length: it is counted in bytes before it arrives.',
    },
    411,
    { 'Content-Type': 'application/problem+json' },
  )
}

function contentLength(c: Context): number {
  return Number(c.req.header('content-length'))
}
