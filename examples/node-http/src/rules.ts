import type { RulesOptions } from '@tollgate/core'

// A fixed window: every store runs it, the hybrid one included (which cannot sum a sliding log).
export const rules = {
  api: { algorithm: 'fixed-window', windows: [{ limit: 5, period: '10s' }] },
} satisfies RulesOptions
