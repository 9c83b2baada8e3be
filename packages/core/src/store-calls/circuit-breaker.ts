import { checkOptionsObject, integerOption, optionKeys } from '../support/option-objects.js'

/**
 * - `closed`: decisions go to the store.
 * - `open`: the store failed repeatedly; decisions take the failure policy at once, without
 *   waiting out a timeout each.
 * - `half-open`: one decision is let through to probe the store; its answer closes or reopens.
 */
export type BreakerState = 'closed' | 'open' | 'half-open'

export interface BreakerChange {
  state: BreakerState
  previous: BreakerState
  /** The failure that opened the breaker. */
  error?: Error
}

export interface CircuitBreakerOptions {
  /**
   * Consecutive store failures (errors or timeouts) that open the breaker. A failure its store
   * marks as one decision's own (`storeDown: false`, e.g. a key of the wrong type) is not
   * counted and does not break the run either.
   * @default 3
   */
  failureThreshold?: number
  /**
   * How long the breaker stays open before one decision probes the store again. Recovery
   * therefore takes at most this long after the store answers again.
   * @default 500
   */
  probeAfterMs?: number
}

const OPTION_KEYS = optionKeys<CircuitBreakerOptions>({ failureThreshold: true, probeAfterMs: true })

export type BreakerSettings = Readonly<Required<CircuitBreakerOptions>>

export function breakerSettingsOf(options: unknown): BreakerSettings {
  const { failureThreshold = 3, probeAfterMs = 500 } = checkOptionsObject(
    options ?? {},
    OPTION_KEYS,
    'createLimiter option breaker',
  )
  return {
    failureThreshold: integerOption(failureThreshold, 1, 1000, 'breaker option failureThreshold'),
    probeAfterMs: integerOption(probeAfterMs, 1, 60_000, 'breaker option probeAfterMs'),
  }
}

/** Counts consecutive failures and decides which calls may reach the store. */
export class CircuitBreaker {
  private state: BreakerState = 'closed'
  private failures = 0
  private openedAt = 0
  private probing = false

  constructor(
    private readonly settings: BreakerSettings,
    private readonly onChange: (change: BreakerChange) => void,
    private readonly now: () => number = () => performance.now(),
  ) {}

  get current(): BreakerState {
    return this.state
  }

  /** Whether this call may go to the store. While half-open only one call at a time probes. */
  tryAcquire(): boolean {
    if (this.state === 'closed') return true
    if (this.state === 'open') {
      if (this.now() - this.openedAt < this.settings.probeAfterMs) return false
      this.move('half-open')
    }
    if (this.probing) return false
    this.probing = true
    return true
  }

  success(): void {
    this.failures = 0
    this.probing = false
    if (this.state !== 'closed') this.move('closed')
  }

  /**
   * A call that ended in a way that says nothing of the store's health (one decision's own
   * failure): the count of failures stays as it was, and a probe's turn passes to the next call.
   */
  inconclusive(): void {
    this.probing = false
  }

  failure(error: Error): void {
    this.failures++
    this.probing = false
    if (this.state === 'half-open' || (this.state === 'closed' && this.failures >= this.settings.failureThreshold)) {
      this.openedAt = this.now()
      this.move('open', error)
    }
  }

  private move(state: BreakerState, error?: Error): void {
    const previous = this.state
    this.state = state
    this.onChange(error ? { state, previous, error } : { state, previous })
  }
}
