import { randomUUID } from 'node:crypto'
import { byIpAndUser, type ClientView, type Limiter, userIdentifier } from '@tollgate/core'
import tollgate from '@tollgate/fastify'
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify'

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
    {
      // A route's own hooks run before the limit's, which the plugin appends.
      onRequest: requireContentLength,
      config: { rateLimit: { rule: 'upload.bytes', cost: contentLength, quotaUnit: 'content-bytes' } },
    },
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
  return typeof id === 'string' && id !== '' ? userIdentifier(id) : client.ipIdentifier
}

// The byte quota is charged before the body arrives, by the length it declares, and Node stops a
// body at that length. A chunked upload declares none and would cost nothing: it is refused.
async function requireContentLength(request: FastifyRequest, reply: FastifyReply) {
  if (request.headers['content-length'] !== undefined) return
  return reply.code(411).type('application/problem+json').send({
    type: 'about:blank',
    title: 'Length Required',
    status: 411,
    detail: 'An upload must declare its Content-Length: it is counted in bytes before it arrives.',
  })
}

function contentLength(request: FastifyRequest): number {
  return Number(request.headers['content-length'])
}
