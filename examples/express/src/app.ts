import { randomUUID } from 'node:crypto'
import { byIpAndUser, type ClientView, type Limiter, userIdentifier } from '@tollgate/core'
import { rateLimit } from '@tollgate/express'
import express, { type Request, type RequestHandler } from 'express'
import type { Registry } from 'prom-client'

export interface AppOptions {
  /** Made from `rules.ts`; the app never closes it. */
  limiter: Limiter
  /** When given, served at `GET /metrics` for Prometheus to scrape. */
  registry?: Registry
}

export function createApp({ limiter, registry }: AppOptions): express.Express {
  const app = express()

  app.get('/health', (_req, res) => {
    res.json({ ok: true })
  })

  if (registry) {
    // Not limited: the scraper must always get through. In production, serve it on a port only it reaches.
    app.get('/metrics', async (_req, res) => {
      res.type(registry.contentType).send(await registry.metrics())
    })
  }

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
    requireContentLength,
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

  app.post(
    '/otp/verify',
    express.json(),
    rateLimit({ limiter, rule: 'auth.otp', identify: (req) => userIdentifier(usernameOf(req) ?? 'anonymous') }),
    (req, res) => {
      // A real app checks the code here: a wrong one counts toward the lockout, as every try does.
      res.json({ verified: req.body?.code === '000000' })
    },
  )

  app.get('/orgs/:org/reports', rateLimit({ limiter, rule: 'reports.user', identify: userAndOrg }), (req, res) => {
    res.json({ org: req.params.org, reports: [] })
  })

  app.post(
    '/complete',
    express.json(),
    // 500 tokens are charged when the request arrives; the tokens the answer took, once it is sent.
    rateLimit({
      limiter,
      rule: 'llm.tokens',
      identify: userOrAddress,
      cost: 500,
      settle: (req) => tokensUsed.get(req) ?? 0,
    }),
    (req, res) => {
      const prompt = typeof req.body?.prompt === 'string' ? req.body.prompt : ''
      // A stand-in for a model: an answer as long as the prompt, a token per 4 characters of both.
      const answer = prompt.split('').reverse().join('')
      tokensUsed.set(req, Math.ceil((prompt.length + answer.length) / 4))
      res.json({ answer })
    },
  )

  return app
}

/** What each request's answer cost, for `settle` to read once the response is sent. */
const tokensUsed = new WeakMap<Request, number>()

// Each level of the hierarchy is charged on its own identifier: the user, then the organisation.
function userAndOrg(req: Request, client: ClientView): string[] {
  const user = req.get('x-user-id')
  return [user ? userIdentifier(user) : client.ipIdentifier, `org:${req.params.org}`]
}

// A username that is not a string (an object, a float) would make an invalid identifier.
function usernameOf(req: Request): string | undefined {
  const username: unknown = req.body?.username
  return typeof username === 'string' ? username : undefined
}

// The header stands in for a real session or token: anyone can send it.
function userOrAddress(req: Request, client: ClientView): string {
  const id = req.get('x-user-id')
  return id ? userIdentifier(id) : client.ipIdentifier
}

// The byte quota is charged before the body arrives, by the length it declares, and Node stops a
// body at that length. A chunked upload declares none and would cost nothing: it is refused.
const requireContentLength: RequestHandler = (req, res, next) => {
  if (req.get('content-length') !== undefined) {
    next()
    return
  }
  res.status(411).type('application/problem+json').send(LENGTH_REQUIRED)
}

const LENGTH_REQUIRED = JSON.stringify({
  type: 'about:blank',
  title: 'Length Required',
  status: 411,
  detail: 'An upload must declare its Content-Length: it is counted in bytes before it arrives.',
})

function contentLength(req: Request): number {
  return Number(req.get('content-length'))
}
