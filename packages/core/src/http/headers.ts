import { createHmac } from 'node:crypto'
import type { Decision, WindowState } from '../rules/decision.js'
import { policyName } from './policy-name.js'
import { retryAfterSeconds } from './retry-after.js'

/**
 * - `draft-10`: `RateLimit-Policy` and `RateLimit`, one Structured Field list item per window
 *   (draft-ietf-httpapi-ratelimit-headers-10).
 * - `draft-8`: the same fields: draft-8 introduced them, and what express-rate-limit calls
 *   `standardHeaders: 'draft-8'` is this list of named items. Drafts 9 and 10 changed their
 *   wording, not their syntax. `pk` stays opt-in (`partitionKey`).
 * - `draft-7`: `RateLimit: limit=…, remaining=…, reset=…` for the window closest to refusing,
 *   and `RateLimit-Policy: 20;w=60, 5;w=3`.
 * - `draft-6`: `RateLimit-Limit`, `RateLimit-Remaining`, `RateLimit-Reset` for that window,
 *   and the same `RateLimit-Policy`.
 * - `legacy`: `X-RateLimit-Limit`, `X-RateLimit-Remaining`, `X-RateLimit-Reset` (epoch seconds).
 */
export type HeadersFormat = 'draft-10' | 'draft-8' | 'draft-7' | 'draft-6' | 'legacy'

export const HEADERS_FORMATS: readonly HeadersFormat[] = ['draft-10', 'draft-8', 'draft-7', 'draft-6', 'legacy']

/**
 * Quota units of the draft's registry: what `cost` counts. `concurrency`, the name used before,
 * is still accepted and sent as `concurrent-requests`, the registered one.
 */
export type QuotaUnit = 'request' | 'content-bytes' | 'concurrent-requests' | 'concurrency'

export const QUOTA_UNITS: readonly QuotaUnit[] = ['request', 'content-bytes', 'concurrent-requests', 'concurrency']

const REGISTERED_UNIT: Readonly<Record<QuotaUnit, string>> = {
  request: 'request',
  'content-bytes': 'content-bytes',
  'concurrent-requests': 'concurrent-requests',
  concurrency: 'concurrent-requests',
}

export interface HeaderOptions {
  format: HeadersFormat
  /** Sent as draft-10 `qu` unless it is the draft's default, `request`. */
  quotaUnit: QuotaUnit
  /**
   * Adds draft-10 `pk` to `RateLimit` items: an HMAC of the identifier under this secret, so
   * clients can tell partitions apart without learning them (an unkeyed digest of an IPv4 address
   * is reversed by trying all 2^32). Undefined: no `pk`.
   */
  partitionKeySecret: string | undefined
}

/** One window per rule and period: the identifier whose window is tightest speaks for all. */
export function tightestPerPolicy(windows: readonly WindowState[]): readonly WindowState[] {
  if (windows.length < 2) return windows
  const byPolicy = new Map<string, WindowState>()
  for (const window of windows) {
    const key = `${window.rule}\u0000${window.periodMs}`
    const seen = byPolicy.get(key)
    if (!seen || tighter(window, seen)) byPolicy.set(key, window)
  }
  return [...byPolicy.values()]
}

function tighter(a: WindowState, b: WindowState): boolean {
  if (a.failed !== b.failed) return a.failed
  if (a.remaining !== b.remaining) return a.remaining < b.remaining
  return a.resetAtMs > b.resetAtMs
}

/** The one window the single-policy formats report: a refusing one (the last to free up), else the fewest remaining. */
function closestToRefusing(windows: readonly WindowState[]): WindowState | undefined {
  let closest: WindowState | undefined
  for (const window of windows) {
    if (
      !closest ||
      (window.failed && !closest.failed) ||
      (window.failed === closest.failed &&
        (window.failed
          ? window.resetAtMs > closest.resetAtMs
          : window.remaining < closest.remaining ||
            (window.remaining === closest.remaining && window.periodMs > closest.periodMs)))
    ) {
      closest = window
    }
  }
  return closest
}

const seconds = (ms: number) => Math.max(0, Math.ceil(ms / 1000))

/**
 * `w` is whole seconds, at least 1: the draft has no sub-second precision. A period that is not a
 * whole number of seconds is rounded up, so that a client pacing itself at `q` per `w` never
 * outruns the limit, where rounding down (1.5 s as `w=1`) would have it send 5 a second against
 * 5 per 1.5 s. The policy's name keeps the exact period (`api-1500ms`).
 */
const windowSeconds = (periodMs: number) => Math.max(1, seconds(periodMs))

function sfString(value: string): string {
  return `"${value.replace(/[\\"]/g, '\\$&')}"`
}

/** A policy's name as a Structured Field String, and its last `RateLimit-Policy` item. */
interface PolicyName {
  quoted: string
  /** The item for `itemLimit` in request units, the common case, kept so as not to build it per response. */
  itemLimit: number
  item: string
}

/**
 * Policy names by rule and period. Every response repeats the same few, and building one takes
 * two regular expressions; a rule name never seen before past the bound starts the cache
 * afresh, so calls with ever-new names cannot grow it without end.
 */
const policyNames = new Map<string, Map<number, PolicyName>>()
const MAX_CACHED_RULES = 1_000

/** Cached by rule and period: an inline rule's name holds its limits, so its limit per period never changes. */
function policyNameOf(rule: string, periodMs: number, limit: number): PolicyName {
  let byPeriod = policyNames.get(rule)
  if (byPeriod === undefined) {
    if (policyNames.size >= MAX_CACHED_RULES) policyNames.clear()
    byPeriod = new Map()
    policyNames.set(rule, byPeriod)
  }
  let name = byPeriod.get(periodMs)
  if (name === undefined) {
    name = { quoted: sfString(policyName(rule, periodMs, limit)), itemLimit: -1, item: '' }
    byPeriod.set(periodMs, name)
  }
  return name
}

function policyItem(window: WindowState, unit: string): string {
  const name = policyNameOf(window.rule, window.periodMs, window.limit)
  if (unit === '' && name.itemLimit === window.limit) return name.item
  const item = `${name.quoted};q=${window.limit};w=${windowSeconds(window.periodMs)}${unit}`
  if (unit === '') {
    name.itemLimit = window.limit
    name.item = item
  }
  return item
}

function partitionKey(secret: string, identifier: string): string {
  return `:${createHmac('sha256', secret).update(identifier, 'utf16le').digest().subarray(0, 12).toString('base64')}:`
}

/**
 * The rate limit header fields for a decision, as a plain record the adapters apply. Empty when
 * the decision holds no windows (a store failure). `Retry-After` (delta seconds, never before the
 * refusing windows free up) accompanies every refusal that can ever pass.
 */
export function rateLimitHeaders(decision: Decision, options: HeaderOptions): Record<string, string> {
  const headers: Record<string, string> = {}
  const retryAfter = retryAfterSeconds(decision)
  if (retryAfter !== undefined) headers['Retry-After'] = String(retryAfter)
  const windows = tightestPerPolicy(decision.windows)
  if (windows.length === 0) return headers
  // Never past the window's own length: a sliding-window counter full in its current window frees
  // its next unit only once that window has become the previous one, up to two periods away, and
  // a client reads `t` beyond `w` as a window longer than the policy says. Retry-After keeps the
  // exact wait.
  const reset = (window: WindowState) =>
    Math.min(seconds(window.resetAtMs - decision.nowMs), windowSeconds(window.periodMs))

  if (options.format === 'draft-10' || options.format === 'draft-8') {
    const unit = options.quotaUnit === 'request' ? '' : `;qu=${sfString(REGISTERED_UNIT[options.quotaUnit])}`
    const secret = options.partitionKeySecret
    let policy = ''
    let state = ''
    for (const w of windows) {
      const separator = policy === '' ? '' : ', '
      policy += separator + policyItem(w, unit)
      state += `${separator}${policyNameOf(w.rule, w.periodMs, w.limit).quoted};r=${w.remaining};t=${reset(w)}`
      // Only on RateLimit: the tightest identifier changes between responses, and the policy field should not.
      if (secret !== undefined) state += `;pk=${partitionKey(secret, w.identifier)}`
    }
    headers['RateLimit-Policy'] = policy
    headers.RateLimit = state
    return headers
  }

  const closest = closestToRefusing(windows) as WindowState
  if (options.format === 'legacy') {
    headers['X-RateLimit-Limit'] = String(closest.limit)
    headers['X-RateLimit-Remaining'] = String(closest.remaining)
    headers['X-RateLimit-Reset'] = String(
      Math.ceil(Math.min(closest.resetAtMs, decision.nowMs + closest.periodMs) / 1000),
    )
    return headers
  }
  headers['RateLimit-Policy'] = windows.map((w) => `${w.limit};w=${windowSeconds(w.periodMs)}`).join(', ')
  if (options.format === 'draft-7') {
    headers.RateLimit = `limit=${closest.limit}, remaining=${closest.remaining}, reset=${reset(closest)}`
  } else {
    headers['RateLimit-Limit'] = String(closest.limit)
    headers['RateLimit-Remaining'] = String(closest.remaining)
    headers['RateLimit-Reset'] = String(reset(closest))
  }
  return headers
}
