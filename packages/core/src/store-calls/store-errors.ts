import { isStoreDown, TollgateError } from '../support/errors.js'

export { isStoreDown }

import type { StoreErrorKind } from './decision-observer.js'
import { isTimeout } from './store-wait.js'

/**
 * Any store failure as a Tollgate error with code TG_STORE, the original kept as `cause`. When
 * the store's connection recently reported an error that the failure does not already name (a
 * timeout says only that the store was silent), the message adds what the store last said, and
 * a failure with no cause of its own takes it as `cause`.
 */
export function asStoreError(cause: unknown, lastSaid?: Error): TollgateError {
  const error =
    cause instanceof TollgateError && cause.code === 'TG_STORE'
      ? cause
      : new TollgateError('TG_STORE', `the store failed: ${messageOf(cause)}`, {
          cause,
          storeDown: cause instanceof TollgateError ? cause.storeDown : undefined,
        })
  if (lastSaid === undefined || lastSaid === error.cause || error.message.includes(lastSaid.message)) return error
  return new TollgateError('TG_STORE', `${error.message}; the store last said: ${lastSaid.message}`, {
    cause: error.cause ?? lastSaid,
    storeDown: error.storeDown,
  })
}

function messageOf(cause: unknown): string {
  return (cause as Error)?.message ?? String(cause)
}

/** The kind of a failure, `cause` as the store gave it and `error` as reported. */
export function storeErrorKindOf(cause: unknown, error: TollgateError): StoreErrorKind {
  if (isTimeout(cause)) return 'timeout'
  return isStoreDown(error) ? 'unavailable' : 'key'
}
