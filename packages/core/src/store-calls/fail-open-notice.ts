import type { WarningHandler } from '../rules/rules.js'
import type { TollgateError } from '../support/errors.js'

/**
 * Says when decisions start failing open and when the store answers again: under `'allow'` a
 * dead store otherwise lets every request through without a word. Silent when the application
 * listens to `store-error` itself, since it then hears of every failure already.
 */
export class FailOpenNotice {
  /** Whether decisions have failed open since the store last answered. */
  failing = false
  private warned = false
  private passed = 0

  constructor(
    private readonly warn: WarningHandler,
    private readonly listened: () => boolean,
  ) {}

  decidedWithoutStore(error: TollgateError): void {
    this.passed++
    if (this.failing) return
    this.failing = true
    if (this.listened()) return
    this.warned = true
    this.warn(
      `decisions are failing open: ${error.message}; requests pass unlimited (onStoreError 'allow') until the store answers again. Listen to the limiter's 'store-error' events to log failures yourself; this warning then stays silent`,
      'TG_STORE_FAILING_OPEN',
    )
  }

  storeAnswered(): void {
    const { warned, passed } = this
    this.failing = false
    this.warned = false
    this.passed = 0
    if (warned) {
      this.warn(
        `the store answers again: decisions are limited again, after ${passed} decisions failed open`,
        'TG_STORE_RECOVERED',
      )
    }
  }
}
