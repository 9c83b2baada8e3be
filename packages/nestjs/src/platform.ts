import type { IncomingHttpHeaders, ServerResponse } from 'node:http'
import type { Socket } from 'node:net'
import type { RateLimitVerdict, RequestView } from '@tollgate/core'

// What the guard reads of the request and response each Nest platform hands it, typed here so
// that the package depends on neither platform.

interface PlatformRequest {
  readonly ip?: string | undefined
  readonly headers: IncomingHttpHeaders
  readonly socket: Socket
  readonly method: string
}

/** Express's `req` (@nestjs/platform-express). */
interface ExpressRequest extends PlatformRequest {
  readonly app: { get(setting: string): unknown }
  readonly originalUrl: string
}

/** Express's `res`: the Node response itself. */
interface ExpressResponse extends ServerResponse {
  set(fields: Record<string, string>): unknown
  status(code: number): ExpressResponse
  type(contentType: string): ExpressResponse
  send(body: string | Buffer): unknown
}

/** Fastify's `request` (@nestjs/platform-fastify). */
interface FastifyRequest extends PlatformRequest {
  readonly url: string
}

/** Fastify's `reply`, over the Node response in `raw`. */
interface FastifyReply {
  readonly raw: ServerResponse
  headers(fields: Record<string, string>): unknown
  code(status: number): FastifyReply
  type(contentType: string): FastifyReply
  send(body: string | Buffer): unknown
}

type RespondVerdict = Extract<RateLimitVerdict, { action: 'respond' }>

function isFastifyReply(response: object): response is FastifyReply {
  return 'raw' in response
}

/** What the engine is told of a request, as `@tollgate/express` and `@tollgate/fastify` tell it. */
export function requestView(request: object, response: object): RequestView {
  if (isFastifyReply(response)) {
    const fastifyRequest = request as FastifyRequest
    return {
      ip: fastifyRequest.ip,
      forwardedFor: fastifyRequest.headers['x-forwarded-for'],
      // Fastify defines `request.ips` only when `trustProxy` is set; asked with `in`, so that the
      // proxy chain is not parsed a second time.
      proxyTrusted: 'ips' in fastifyRequest,
      socketAddress: fastifyRequest.socket.remoteAddress,
      response: response.raw,
      method: fastifyRequest.method,
      url: fastifyRequest.url,
    }
  }
  const expressRequest = request as ExpressRequest
  return {
    ip: expressRequest.ip,
    forwardedFor: expressRequest.headers['x-forwarded-for'],
    // Express keeps the setting as given (true, a hop count, addresses or a function), not a boolean.
    proxyTrusted: Boolean(expressRequest.app.get('trust proxy')),
    socketAddress: expressRequest.socket.remoteAddress,
    response: response as ExpressResponse,
    method: expressRequest.method,
    // req.url loses the path a router is mounted at.
    url: expressRequest.originalUrl,
  }
}

/** Through the platform's own response, so that what it holds for the response (Fastify's headers) goes out too. */
export function setHeaders(response: object, headers: Record<string, string>): void {
  if (isFastifyReply(response)) response.headers(headers)
  else (response as ExpressResponse).set(headers)
}

export function respond(response: object, { status, contentType, body }: RespondVerdict): void {
  if (isFastifyReply(response)) response.code(status).type(contentType).send(body)
  else (response as ExpressResponse).status(status).type(contentType).send(body)
}
