import type { RequestView } from '@tollgate/core'
import type { FastifyReply, FastifyRequest } from 'fastify'

/** Without `reply`, as for a check by hand given none, `countOnly` has no response to watch. */
export function requestView(request: FastifyRequest, reply?: FastifyReply): RequestView {
  return {
    ip: request.ip,
    forwardedFor: request.headers['x-forwarded-for'],
    // Fastify defines `request.ips` only when `trustProxy` is set, and `initialConfig` does not
    // carry `trustProxy`, so this is the one public sign of the setting. Asked with `in`: reading
    // it would run the proxy chain's parse a second time per request (`request.ip` runs it once;
    // bench/README.md has what that costs).
    proxyTrusted: 'ips' in request,
    socketAddress: request.socket.remoteAddress,
    response: reply?.raw,
    method: request.method,
    url: request.url,
  }
}
