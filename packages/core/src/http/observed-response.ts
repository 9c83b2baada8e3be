/**
 * The part of Node's `ServerResponse` that tells how a response ended. Express's `res`,
 * Fastify's `reply.raw` and Koa's `ctx.res` are all one, so the outcome is read the same way
 * whatever the framework, after its error handling has set the status it sends. An adapter with
 * no Node response hands an object of its own that emits the same events: `@tollgate/hono`'s
 * emits `finish` with the status Hono's handlers answered with, or `close` alone when the
 * request's signal aborts first.
 */
export interface ObservedResponse {
  readonly statusCode: number
  /** True once the app has ended the response, even if the client left before it was delivered. */
  readonly writableEnded: boolean
  once(event: 'finish' | 'close', listener: () => void): unknown
}
