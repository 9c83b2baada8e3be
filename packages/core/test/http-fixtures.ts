import { EventEmitter } from 'node:events'
import { afterEach, expect } from 'vitest'
import { createRateLimit, type RateLimit, type RequestView } from '../src/http/rate-limit.js'
import type { RateLimitOptions } from '../src/http/rate-limit-options.js'
import { createLimiter, type Limiter } from '../src/limiter/limiter.js'
import type { RulesOptions } from '../src/rules/rules.js'
import { MemoryStore } from '../src/stores/memory/memory-store.js'
import type { Store } from '../src/stores/store.js'

/** A whole minute, so that every window starts with the clock. */
export const T = 1_763_712_000_000
export const IP = 'ip:203.0.113.7'

const opened: Array<{ close(): Promise<void> }> = []

afterEach(async () => {
  await Promise.all(opened.splice(0).map((closable) => closable.close()))
})

/** An engine closed after the test, its warnings dropped unless the options take them. */
export function engine<Req>(options: RateLimitOptions<Req>): RateLimit<Req> {
  const made = createRateLimit<Req>({ onWarning: () => {}, ...options })
  opened.push(made)
  return made
}

export function limiterOf(rules: RulesOptions, store: Store = memoryStore()): Limiter {
  const limiter = createLimiter({ store, rules, onWarning: () => {} })
  opened.push(limiter)
  return limiter
}

export function memoryStore(clock: () => number = () => T): MemoryStore {
  return new MemoryStore({ clock, sweepIntervalMs: 0 })
}

export function view(overrides: Partial<RequestView> = {}): RequestView {
  return { ip: '203.0.113.7', forwardedFor: undefined, proxyTrusted: false, ...overrides }
}

/** A stand-in for Node's ServerResponse: the test says when and how the response ends. */
export class FakeResponse extends EventEmitter {
  statusCode = 200
  writableEnded = false

  /** The app answered with `status` and the response went out: `finish`, then `close`. */
  answer(status: number): void {
    this.statusCode = status
    this.writableEnded = true
    this.emit('finish')
    this.emit('close')
  }

  /** The connection closed before the app answered. */
  abort(): void {
    this.emit('close')
  }
}

/** Lets pending promise callbacks run: a refund on the memory store settles within a few turns. */
export async function settled(): Promise<void> {
  for (let i = 0; i < 10; i++) await new Promise((resolve) => setImmediate(resolve))
}

export async function remaining(
  limiter: Limiter,
  rule: string,
  identifiers: string | string[] = IP,
): Promise<number[]> {
  const decision = await limiter.peek(rule, identifiers, { cost: 0 })
  expect(decision.windows.length).toBeGreaterThan(0)
  return decision.windows.map((window) => window.remaining)
}
