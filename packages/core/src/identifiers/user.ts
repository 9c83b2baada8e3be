import { describeValue, TollgateArgumentError } from '../support/errors.js'

/**
 * The rate-limit identifier of an authenticated user: `'user:<id>'`. String ids are kept exactly
 * as given (keys are made safe where they are built), so `'Alice'` and `'alice'` are two users.
 * Numbers must be safe integers: above 2^53 distinct ids round to the same number before they
 * reach this function, so pass those as a string or a bigint.
 *
 * @param id A non-empty string, a safe integer or a bigint.
 * @throws {TollgateArgumentError} `id` is an empty string, a number that is not a safe integer, or
 * of another type.
 * @example
 * userIdentifier(42) // 'user:42'
 * userIdentifier('alice') // 'user:alice'
 * userIdentifier(9007199254740993n) // 'user:9007199254740993'
 */
export function userIdentifier(id: string | number | bigint): string {
  switch (typeof id) {
    case 'string':
      if (id !== '') return `user:${id}`
      break
    case 'number':
      if (Number.isSafeInteger(id)) return `user:${id}`
      break
    case 'bigint':
      return `user:${id}`
  }
  throw new TollgateArgumentError(
    `userIdentifier: ${describeValue(id)} is not a user id: use a non-empty string, a safe integer or a bigint`,
  )
}
