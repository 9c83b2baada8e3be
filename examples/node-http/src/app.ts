import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import { createRateLimit, type Limiter } from '@tollgate/core'

/**
 * A plain `node:http` server limited by Tollgate's HTTP engine, the one the Express, Fastify and
 * Koa adapters are thin glue over: `check` decides for a request and answers headers to set and
 * either `continue` or a whole refusal to send.
 */
export function createApp({ limiter }: { limiter: Limiter }): Server {
  const limit = createRateLimit<IncomingMessage>({ limiter, rule: 'api' })

  return createServer(async (req, res) => {
    try {
      const verdict = await limit.check(req, {
        // No proxy in front here; behind one, pass the client address your proxy reports and
        // proxyTrusted: true (see docs/production.md on trusting proxies).
        ip: req.socket.remoteAddress,
        socketAddress: req.socket.remoteAddress,
        forwardedFor: req.headers['x-forwarded-for'],
        proxyTrusted: false,
      })
      for (const [name, value] of Object.entries(verdict.headers)) res.setHeader(name, value)
      if (verdict.action === 'respond') {
        res.writeHead(verdict.status, { 'content-type': verdict.contentType }).end(verdict.body)
        return
      }
      handle(req, res)
    } catch (error) {
      // `check` rejects only for a failing identify, cost or skip of your own; never for the store.
      res.writeHead(500).end()
      console.error(error)
    }
  })
}

function handle(req: IncomingMessage, res: ServerResponse): void {
  res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ path: req.url }))
}
