import { loadRules } from '@tollgate/core'

export const rules = loadRules(new URL('../rules.yaml', import.meta.url))
