/** The part of an ioredis client that reports its errors: its 'error' and (Cluster) 'node error' events. */
export interface ErrorEvents {
  on(event: 'error' | 'node error', listener: (error: Error) => void): unknown
  off(event: 'error' | 'node error', listener: (error: Error) => void): unknown
}

const EVENTS = ['error', 'node error'] as const

/**
 * What one client last reported as an error (a refused AUTH, a server still loading, a lost
 * connection), until Redis answers again: ioredis reports such errors as events, while the
 * commands waiting meanwhile only time out. Stores on the same client share one listener, so
 * that a store per limiter does not trip Node's limit on listeners.
 */
export class ClientErrors {
  private static readonly byClient = new WeakMap<ErrorEvents, ClientErrors>()
  /** Cleared by `answered()`: an error from before the last answer no longer explains anything. */
  recent: Error | undefined = undefined
  private users = 0
  private readonly record = (error: Error) => {
    this.recent = error
  }

  private constructor(private readonly client: ErrorEvents) {}

  /** Starts listening on the client, or joins the stores already listening; call `release` when done. */
  static of(client: ErrorEvents): ClientErrors {
    let errors = ClientErrors.byClient.get(client)
    if (errors === undefined) {
      errors = new ClientErrors(client)
      ClientErrors.byClient.set(client, errors)
      for (const event of EVENTS) client.on(event, errors.record)
    }
    errors.users++
    return errors
  }

  answered(): void {
    this.recent = undefined
  }

  /** The last store on the client to release it removes the listener. */
  release(): void {
    if (--this.users > 0) return
    for (const event of EVENTS) this.client.off(event, this.record)
    ClientErrors.byClient.delete(this.client)
  }
}
