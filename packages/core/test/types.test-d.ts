import type { ClientView, RateLimitOptions } from '../src/index.js'

interface Req {
  user: { id: number }
}

// Type-checked by tsc, never run.
// Regression: the documented identify example did not compile, client.ipIdentifier being
// `string | undefined` and the array `(string | undefined)[]`.
export const documented: RateLimitOptions<Req> = {
  windows: [{ limit: 100, period: '1m' }],
  identify: (req, client) => [client.ipIdentifier, `user:${req.user.id}`],
}

export const ipIdentifier = (client: ClientView): string => client.ipIdentifier
