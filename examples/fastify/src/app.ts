import { randomUUID } from 'node:crypto'
import { byIpAndUser, type ClientView, type Limiter, userIdentifier } from '@tollgate/core'
import tollgate from '@tollgate/fastify'
import Fastify, { type FastifyInstance, type FastifyRequest } from 'fastify'

export interface AppOptions {
  /** Made from `rules.ts`; the app never closes it. */
  limiter: Limiter
}

export async function createApp({ limiter }: AppOptions): Promise<FastifyInstance> {
  const app = Fastify()

  // These options limit every route whose config.rateLimit does not override them (or turn them
  // off with false). Awaited, so that the plugin sees the routes added after it.
  await app.register(tollgate, { limiter, rule: 'api.read', identify: userOrAddress })

  // Uploads arrive as raw bytes, which Fastify does not parse by default.
  app.addContentTypeParser('application/octet-stream', { parseAs: 'buffer' }, (_request, body, done) => {
    done(null, body)
  })

  app.get('/health', { config: { rateLimit: false } }, async () => ({ ok: true }))

  app.post(
    '/login',
    {
      config: {
        rateLimit: {
          rule: 'auth.createToken',
          identify: byIpAndUser(usernameOf),
          // After the body is parsed: the limiter reads the username from it.
          hook: 'preHandler',
        },
      },
    },
    // A real app checks the password here; every attempt has been counted, right or wrong.
    async (request) => ({ token: `fake-${usernameOf(request) ?? 'anonymous'}-${randomUUID()}` }),
  )

  app.get('/api/items', async () => ({ items: [{ id: 1, name: 'first' }] }))

  app.post(
    '/upload',
    { config: { rateLimit: { rule: 'upload.bytes', cost: contentLength, quotaUnit: 'content-bytes' } } },
    async (request) => ({ received: Buffer.isBuffer(request.body) ? request.body.length : 0 }),
  )

  return app
}

// A username that is not a string (an object, a float) would make an invalid identifier.
function usernameOf(request: FastifyRequest): string | undefined {
  const body = request.body as { username?: unknown } | undefined
  return typeof body?.username === 'string' ? body.username : undefined
}

// The header stands in for a real session or token: anyone can send it.
function userOrAddress(request: FastifyRequest, client: ClientView): string {
  const id = request.headers['x-user-id']
  return typeof id === 'string' && id !== '' ? userIdentifier(id) : (client.ipIdentifier ?? 'ip:unknown')
}

// A chunked body has no Content-Length and costs 0 here: a real app caps such bodies or refuses them (411).
function contentLength(request: FastifyRequest): number {
  const bytes = Number(request.headers['content-length'] ?? 0)
  return Number.isSafeInteger(bytes) && bytes >= 0 ? bytes : 0
}
