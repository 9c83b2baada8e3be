import type { RedisConnection } from '../../redis-clients/connection.js'

/**
 * What one client last reported as an error (a refused AUTH, a server still loading, a lost
 * connection), until Redis answers again: the clients report such errors as events, while the
 * commands waiting meanwhile only time out. Stores on the same client share one listener, so
 * that a store per limiter does not trip Node's limit on listeners.
 */
export class ClientErrors {
  private static readonly byConnection = new WeakMap<RedisConnection, ClientErrors>()
  /** Cleared by `answered()`: an error from before the last answer no longer explains anything. */
  recent: Error | undefined = undefined
  private users = 0
  private readonly stop: () => void

  private constructor(private readonly connection: RedisConnection) {
    this.stop = connection.onError((error) => {
      this.recent = error
    })
  }

  /** Starts listening on the client, or joins the stores already listening; call `release` when done. */
  static of(connection: RedisConnection): ClientErrors {
    let errors = ClientErrors.byConnection.get(connection)
    if (errors === undefined) {
      errors = new ClientErrors(connection)
      ClientErrors.byConnection.set(connection, errors)
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
    this.stop()
    ClientErrors.byConnection.delete(this.connection)
  }
}
