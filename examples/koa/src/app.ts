import { randomUUID } from 'node:crypto'
import { bodyParser } from '@koa/bodyparser'
import Router from '@koa/router'
import { byIpAndUser, type ClientView, type Limiter, userIdentifier } from '@tollgate/core'
import { rateLimit } from '@tollgate/koa'
import Koa, { type Context, type Next } from 'koa'

export interface AppOptions {
  /** Made from `rules.yaml`; the app never closes it. */
  limiter: Limiter
}

export function createApp({ limiter }: AppOptions): Koa {
  const app = new Koa()
  const router = new Router()

  router.get('/health', (ctx) => {
    ctx.body = { ok: true }
  })

  router.post(
    '/login',
    // Parsed before the limiter, which reads the username from the body.
    bodyParser({ enableTypes: ['json'] }),
    rateLimit({ limiter, rule: 'auth.createToken', identify: byIpAndUser(usernameOf) }),
    (ctx) => {
      // A real app checks the password here; every attempt has been counted, right or wrong.
      ctx.body = { token: `fake-${usernameOf(ctx) ?? 'anonymous'}-${randomUUID()}` }
    },
  )

  router.get('/api/items', rateLimit({ limiter, rule: 'api.read', identify: userOrAddress }), (ctx) => {
    ctx.body = { items: [{ id: 1, name: 'first' }] }
  })

  router.post(
    '/upload',
    requireContentLength,
    rateLimit({
      limiter,
      rule: 'upload.bytes',
      identify: userOrAddress,
      cost: contentLength,
      quotaUnit: 'content-bytes',
    }),
    async (ctx) => {
      let received = 0
      for await (const chunk of ctx.req) received += (chunk as Buffer).length
      ctx.body = { received }
    },
  )

  app.use(router.routes())
  app.use(router.allowedMethods())
  return app
}

// A username that is not a string (an object, a float) would make an invalid identifier.
function usernameOf(ctx: Context): string | undefined {
  const body = ctx.request.body as { username?: unknown } | undefined
  return typeof body?.username === 'string' ? body.username : undefined
}

// The header stands in for a real session or token: anyone can send it.
function userOrAddress(ctx: Context, client: ClientView): string {
  const id = ctx.get('x-user-id')
  return id ? userIdentifier(id) : client.ipIdentifier
}

// The byte quota is charged before the body arrives, by the length it declares, and Node stops a
// body at that length. A chunked upload declares none and would cost nothing: it is refused.
async function requireContentLength(ctx: Context, next: Next) {
  if (ctx.get('content-length') !== '') return next()
  ctx.status = 411
  ctx.body = {
    type: 'about:blank',
    title: 'Length Required',
    status: 411,
    detail: 'An upload must declare its Content-Length: it is counted in bytes before it arrives.',
  }
  ctx.type = 'application/problem+json'
}

function contentLength(ctx: Context): number {
  return Number(ctx.get('content-length'))
}
