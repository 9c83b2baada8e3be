import type { WindowState } from '../src/rules/decision.js'

/** 900 ms past a whole second, so that rounding up and down give different answers. */
export const NOW = 1_763_712_000_900

/** A 20 per minute window of `api` for one address, 7 left, freeing a unit in 12.1 s. */
export function windowState(overrides: Partial<WindowState> = {}): WindowState {
  return {
    rule: 'api',
    identifier: 'ip:203.0.113.7',
    limit: 20,
    periodMs: 60_000,
    remaining: 7,
    resetAtMs: NOW + 12_100,
    failed: false,
    ...overrides,
  }
}
