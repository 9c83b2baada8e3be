import { TollgateError } from '../support/errors.js'

/** The first error a limiter's listener threw while rules were applied, thrown once every limiter has them. */
export class ListenerFailure {
  private error: { thrown: unknown } | undefined

  catch(work: () => void): void {
    try {
      work()
    } catch (thrown) {
      this.error ??= { thrown }
    }
  }

  rethrow(): void {
    if (this.error) throw this.error.thrown
  }
}

/**
 * For reads nobody awaits (the poll, a nudge): a Redis failure was warned of already; anything
 * else is a listener's error, thrown as it would be from an event emitted on a timer.
 */
export function unlessReported(error: unknown): void {
  if (error instanceof TollgateError && (error.code === 'TG_STORE' || error.code === 'TG_CLOSED')) return
  queueMicrotask(() => {
    throw error
  })
}
