import { userIdentifier } from '../identifiers/user.js'
import type { ClientView } from './rate-limit-options.js'

/**
 * An `identify` that counts a request for its client address and, when `userOf` finds one,
 * for its user too: both charged in the same atomic decision. A user id `userIdentifier` refuses
 * (an object, a fraction) leaves the request counted for its address alone, with a warning.
 * @example rateLimit({ rule: 'auth.createToken', rules, identify: byIpAndUser((req) => req.body?.username) })
 */
export function byIpAndUser<Req>(
  userOf: (
    request: Req,
  ) => string | number | bigint | null | undefined | Promise<string | number | bigint | null | undefined>,
): (request: Req, client: ClientView) => Promise<string[]> {
  return async (request, client) => {
    const user = await userOf(request)
    const ip = client.ipIdentifier
    return user === undefined || user === null || user === '' ? [ip] : [ip, userIdentifier(user)]
  }
}
