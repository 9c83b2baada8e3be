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
  // One-time codes: 3 tries per 10 minutes, then locked out for 15 minutes, twice as long each
  // time it happens again, up to a day.
  'auth.otp': {
    algorithm: 'fixed-window',
    windows: [{ limit: 3, period: '10m' }],
    block: { for: '15m', factor: 2, max: '1d' },
  },
  // A tenant hierarchy, one decision: each user 10 a minute, each organisation 30, everyone 1000;
  // acme pays for 100, and test organisations get 2.
  // A visitor without a user id counts by address.
  'reports.user': {
    algorithm: 'gcra',
    windows: [{ limit: 10, period: '1m' }],
    by: ['user', 'ip'],
    parent: 'reports.org',
  },
  'reports.org': {
    algorithm: 'gcra',
    windows: [{ limit: 30, period: '1m' }],
    by: ['org'],
    parent: 'reports',
    overrides: {
      'org:acme': { windows: [{ limit: 100, period: '1m' }] },
      'org:*-test': { windows: [{ limit: 2, period: '1m' }] },
    },
  },
  reports: { algorithm: 'gcra', windows: [{ limit: 1000, period: '1m' }], by: [] },
  // Tokens of a language model, known once the answer is written: 10,000 a minute per user,
  // refilled continuously; an answer that overshoots is debt the next requests wait out.
  'llm.tokens': { algorithm: 'token-bucket', windows: [{ limit: 10_000, period: '1m' }] },
} satisfies RulesOptions
