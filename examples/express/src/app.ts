import { randomUUID } from 'node:crypto'
import { byIpAndUser, type ClientView, type Limiter, userIdentifier } from '@tollgate/core'
import { rateLimit } from '@tollgate/express'
import express, { type Request } from 'express'

export interface AppOptions {
  /** Made from `rules.ts`; the app never closes it. */
  limiter: Limiter
}

export function createApp({ limiter }: AppOptions): express.Express {
  const app = express()

  app.get('/health', (_req, res) => {
    res.json({ ok: true })
  })

  app.post(
    '/login',
    // Parsed before the limiter, which reads the username from the body.
    express.json(),
    rateLimit({ limiter, rule: 'auth.createToken', identify: byIpAndUser(usernameOf) }),
    (req, res) => {
      // A real app checks the password here; every attempt has been counted, right or wrong.
      res.json({ token: `fake-${usernameOf(req) ?? 'anonymous'}-${randomUUID()}` })
    },
  )

  app.get('/api/items', rateLimit({ limiter, rule: 'api.read', identify: userOrAddress }), (_req, res) => {
    res.json({ items: [{ id: 1, name: 'first' }] })
  })

  app.post(
    '/upload',
    rateLimit({
      limiter,
      rule: 'upload.bytes',
      identify: userOrAddress,
      cost: contentLength,
      quotaUnit: 'content-bytes',
    }),
    async (req, res) => {
      let received = 0
      for await (const chunk of req) received += (chunk as Buffer).length
      res.json({ received })
    },
  )

  return app
}

// A username that is not a string (an object, a float) would make an invalid identifier.
function usernameOf(req: Request): string | undefined {
  const username: unknown = req.body?.username
  return typeof username === 'string' ? username : undefined
}

// The header stands in for a real session or token: anyone can send it.
function userOrAddress(req: Request, client: ClientView): string {
  const id = req.get('x-user-id')
  return id ? userIdentifier(id) : (client.ipIdentifier ?? 'ip:unknown')
}

// A chunked body has no Content-Length and costs 0 here: a real app caps such bodies or refuses them (411).
function contentLength(req: Request): number {
  const bytes = Number(req.get('content-length') ?? 0)
  return Number.isSafeInteger(bytes) && bytes >= 0 ? bytes : 0
}
