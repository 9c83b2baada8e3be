import type { ObservedResponse } from '@tollgate/core'

export const ANSWER = Symbol('tollgate: the answer to this request')

/**
 * The response as core watches it for `countOnly`, which reads a Node response's `finish` and
 * `close`. Hono has no such response on every runtime, so this one ends when it is told the
 * status the handlers answered with (`finish`), or when the request's signal aborts first: the
 * client went away (`close` alone, status unknown). A runtime whose signal never aborts leaves a
 * request whose handler never answers charged.
 */
export class Answer implements ObservedResponse {
  statusCode = 0
  writableEnded = false
  #listeners: Array<() => void> | undefined = []

  constructor(private readonly request: Request) {}

  once(_event: 'finish' | 'close', listener: () => void): this {
    if (this.#listeners === undefined) return this
    // Only for a request core watches: on @hono/node-server, the signal is made when first asked for.
    if (this.#listeners.length === 0) this.request.signal.addEventListener('abort', () => this.#end(), { once: true })
    this.#listeners.push(listener)
    return this
  }

  answered(status: number): void {
    if (this.#listeners === undefined) return
    this.statusCode = status
    // A signal that aborted before core watched it never tells its listeners.
    this.writableEnded = this.#listeners.length === 0 || !this.request.signal.aborted
    this.#end()
  }

  #end(): void {
    const listeners = this.#listeners
    this.#listeners = undefined
    for (const listener of listeners ?? []) listener()
  }
}
