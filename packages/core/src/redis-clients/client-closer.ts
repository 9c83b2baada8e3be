import { describeValue, TollgateConfigError } from '../support/errors.js'
import type { RedisConnection } from './connection.js'

/**
 * The `closeClient` option of the stores and `LiveRules`, checked at construction: the function
 * their `close()` calls last when it is `true` (one close of the client, however often it is
 * called), undefined when the client stays open.
 */
export function clientCloser(
  value: unknown,
  connection: RedisConnection,
  where: string,
): (() => Promise<void>) | undefined {
  if (value === undefined || value === false) return undefined
  if (value !== true) {
    throw new TollgateConfigError(`${where} option closeClient must be true or false, got ${describeValue(value)}`)
  }
  let closing: Promise<void> | undefined
  return () => {
    closing ??= connection.close()
    return closing
  }
}
