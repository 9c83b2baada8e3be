import type { RulesOptions } from '@tollgate/core'

export const rules = {
  // Logins: a burst cap and a minute cap, each applied to the address and to the username.
  'auth.createToken': {
    algorithm: 'sliding-log',
    windows: [
      { limit: 20, period: '60s' },
      { limit: 5, period: '3s' },
    ],
  },
  api: { algorithm: 'token-bucket', windows: [{ limit: 1000, period: '1m' }] },
  // Reads have their own budget and also spend from the whole API's, in the same decision.
  'api.read': { algorithm: 'gcra', windows: [{ limit: 100, period: '1m' }], parent: 'api' },
  // Counted in bytes: each upload costs its Content-Length.
  'upload.bytes': { algorithm: 'sliding-log', windows: [{ limit: 1_000_000, period: '1m' }] },
} satisfies RulesOptions
