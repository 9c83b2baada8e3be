import { scaleOf } from '../../algorithms/bucket.js'
import type { PeriodState } from '../../algorithms/period-state.js'
import type { AlgorithmName, Window } from '../../rules/rules.js'

/**
 * A counter's value in Redis, decoded exactly as lua/ reads it (lua/lib/counter_state.lua,
 * fixed_window.lua, sliding_window.lua, bucket.lua) and converted to the TypeScript models' state
 * (algorithms/), as a HybridStore takes the fleet's totals. Writing values, and a sliding log's
 * members, is only the tests' to do: test/src/redis-codec.ts, on the layouts here.
 *
 * A counter key (fixed window, sliding window, bucket) holds one string with the same fields per
 * window in one of three encodings:
 * - addable, for a rule of one window whose two fields are a time in whole seconds and a count
 *   below ADDABLE: the negative integer -(f1 / 1000 × ADDABLE + f2), `-1763700060000042`, which a
 *   sync adds to with one DECRBY. A compact value is never negative: the sign tells them apart.
 * - compact, for a rule of one window whose fields fit otherwise: the fields' digits run together, f1 then
 *   the others, then one length digit for each but f1: `1763700060000` `42` `2`. Redis keeps such
 *   a value as an integer, in less memory than a string (bench/README.md).
 * - text, otherwise: `period:f1:f2… ` for each window that has fields, in the rule's order, each
 *   entry ended by a space. Entries are matched to windows by period; an addable or compact value
 *   belongs to the rule's first window.
 * Version 0.1.0 wrote the text form as `period v1 v2 …` with other fields; such a value (a space
 * but no ':') is still read, in its own layout.
 *
 * A sliding-log key is a sorted set (test/src/redis-codec.ts, `decodeSlidingLog`).
 */

/** Fixed window: the window counted in ends at `endsAt` (ms, also the key's expiry); `count` units were charged in it. */
export interface FixedWindowFields {
  endsAt: number
  count: number
}

/**
 * Sliding window: `count` units charged in the current window and `previous` in the one before;
 * `expiresAt` is when the state stops counting (ms, also the key's expiry): the end of the
 * window after the current one while `count` > 0, else the end of the current one.
 */
export interface SlidingWindowFields {
  expiresAt: number
  count: number
  previous: number
}

/**
 * Token bucket and GCRA: at `measuredAt` (ms) the bucket lacked `deficit` units of full, a token
 * being `scaleOf(window).perToken` units (algorithms/bucket.ts).
 */
export interface BucketFields {
  measuredAt: number
  deficit: number
}

export type CounterAlgorithm = Exclude<AlgorithmName, 'sliding-log'>

export interface CounterFieldsOf {
  'fixed-window': FixedWindowFields
  'sliding-window': SlidingWindowFields
  'token-bucket': BucketFields
  gcra: BucketFields
}

/** A counter key's state: per window of the rule, in order, its fields, or undefined when it has none. */
export type CounterState<A extends CounterAlgorithm> = Array<CounterFieldsOf[A] | undefined>

/** The largest number a compact value holds after its first: its length must fit one digit. */
export const MAX_PACKED = 999_999_999
/** An addable value's count is below this; its time, in whole seconds, is its multiple above (lua/lib/counter_state.lua). */
export const ADDABLE = 1_000_000
/** An addable value's time is before this (ms): its magnitude then stays below 2^53. */
export const ADDABLE_ENDS_BEFORE = 9_000_000_000_000

/** How one algorithm's fields map to the numbers both encodings hold, and to its model's values. */
export interface Layout<F> {
  readonly arity: number
  fields(values: readonly number[]): F
  values(fields: F): number[]
  /** 0.1.0's text fields, turned into these. */
  legacy(window: Window, values: readonly number[]): F
  /** When this window's state stops mattering (0: it already has); the key expires at the latest. */
  expiresAt(window: Window, fields: F): number
  /**
   * The model's values for the window (algorithms/), after its period in a PeriodState; with
   * `owed`, a bucket's deficit past its capacity is kept (a negative level) rather than capped.
   */
  toModel(window: Window, fields: F, owed: boolean): number[]
  fromModel(window: Window, values: readonly number[]): F
}

type Numbers = readonly [number, number, number]

const FIXED_WINDOW: Layout<FixedWindowFields> = {
  arity: 2,
  fields: ([endsAt, count]) => ({ endsAt, count }) as FixedWindowFields,
  values: ({ endsAt, count }) => [endsAt, count],
  legacy: ({ periodMs }, values) => {
    const [index, count] = values as Numbers
    return { endsAt: (index + 1) * periodMs, count }
  },
  expiresAt: (_, { endsAt, count }) => (count > 0 ? endsAt : 0),
  toModel: ({ periodMs }, { endsAt, count }) => [Math.floor((endsAt - 1) / periodMs), count],
  fromModel: ({ periodMs }, values) => {
    const [index, count] = values as Numbers
    return { endsAt: (index + 1) * periodMs, count }
  },
}

const SLIDING_WINDOW: Layout<SlidingWindowFields> = {
  arity: 3,
  fields: ([expiresAt, count, previous]) => ({ expiresAt, count, previous }) as SlidingWindowFields,
  values: ({ expiresAt, count, previous }) => [expiresAt, count, previous],
  legacy: (window, values) => SLIDING_WINDOW.fromModel(window, values),
  expiresAt: (_, { expiresAt, count, previous }) => (count > 0 || previous > 0 ? expiresAt : 0),
  toModel: ({ periodMs }, { expiresAt, count, previous }) => [
    Math.floor((expiresAt - 1) / periodMs) - (count > 0 ? 1 : 0),
    count,
    previous,
  ],
  fromModel: ({ periodMs }, values) => {
    const [index, count, previous] = values as Numbers
    return { expiresAt: (index + (count > 0 ? 2 : 1)) * periodMs, count, previous }
  },
}

const BUCKET: Layout<BucketFields> = {
  arity: 2,
  fields: ([measuredAt, deficit]) => ({ measuredAt, deficit }) as BucketFields,
  values: ({ measuredAt, deficit }) => [measuredAt, deficit],
  // A level past the capacity (an edited window) is a full bucket.
  legacy: (window, values) => {
    const [level, measuredAt] = values as Numbers
    return { measuredAt, deficit: Math.max(0, scaleOf(window).capacity - level) }
  },
  expiresAt: (window, { measuredAt, deficit }) =>
    deficit > 0 ? measuredAt + Math.ceil(deficit / scaleOf(window).perMs) : 0,
  // A decision's read caps the deficit at the capacity: after an edit of the window it may
  // exceed it. A HybridStore's sync leaves units admitted past the capacity owed (lua/sync.lua).
  toModel: (window, { measuredAt, deficit }, owed) => {
    const { capacity } = scaleOf(window)
    return [capacity - (owed ? deficit : Math.min(deficit, capacity)), measuredAt]
  },
  fromModel: (window, values) => {
    const [level, measuredAt] = values as Numbers
    return { measuredAt, deficit: scaleOf(window).capacity - level }
  },
}

const LAYOUTS: { readonly [A in CounterAlgorithm]: Layout<CounterFieldsOf[A]> } = {
  'fixed-window': FIXED_WINDOW,
  'sliding-window': SLIDING_WINDOW,
  'token-bucket': BUCKET,
  gcra: BUCKET,
}

/** How `algorithm`'s fields map to the numbers Redis keeps and to its model's values. */
export function layoutOf<A extends CounterAlgorithm>(algorithm: A): Layout<CounterFieldsOf[A]> {
  const layout = LAYOUTS[algorithm] as Layout<CounterFieldsOf[A]> | undefined
  if (layout === undefined) throw new TypeError(`not a counter algorithm: ${String(algorithm)}`)
  return layout
}

/**
 * The fields a counter key's value holds for each of `windows` (the rule's, in order), as the
 * decide script reads them: `value` is what GET returned (null: no key). Fields of a period the
 * rule no longer has are dropped.
 */
export function decodeCounterState<A extends CounterAlgorithm>(
  algorithm: A,
  windows: readonly Window[],
  value: string | null,
): CounterState<A> {
  const layout = layoutOf(algorithm)
  const state: CounterState<A> = windows.map(() => undefined)
  if (value === null || value === '') return state
  const { arity } = layout
  if (!value.includes(' ')) {
    if (windows.length > 0)
      state[0] = layout.fields(arity === 2 && value[0] === '-' ? unpackAddable(value) : unpackDigits(value, arity))
    return state
  }
  const legacy = !value.includes(':')
  const numbers = value
    .split(legacy ? ' ' : /[: ]/)
    .filter((part) => part !== '')
    .map(Number)
  for (let at = 0; at + arity < numbers.length; at += arity + 1) {
    const k = windows.findIndex((window) => window.periodMs === numbers[at])
    if (k < 0) continue
    const values = numbers.slice(at + 1, at + 1 + arity)
    state[k] = legacy ? layout.legacy(windows[k] as Window, values) : layout.fields(values)
  }
  return state
}

/**
 * The TypeScript model's state (algorithms/fixed-window.ts, sliding-window.ts, bucket.ts) that
 * decides as this one does; undefined when no window has fields. With `owed` (a HybridStore),
 * a bucket's deficit past its capacity is kept as units the fleet must refill first.
 */
export function toModelState<A extends CounterAlgorithm>(
  algorithm: A,
  windows: readonly Window[],
  state: CounterState<A>,
  owed = false,
): PeriodState | undefined {
  const layout = layoutOf(algorithm)
  const model: PeriodState = []
  for (let k = 0; k < windows.length; k++) {
    const fields = state[k]
    if (fields === undefined) continue
    const window = windows[k] as Window
    model.push(window.periodMs)
    for (const value of layout.toModel(window, fields, owed)) model.push(value)
  }
  return model.length === 0 ? undefined : model
}

/** An addable value's time (ms) and count: -(time / 1000 × ADDABLE + count), exact as a double. */
function unpackAddable(value: string): number[] {
  const magnitude = -Number(value)
  const count = magnitude % ADDABLE
  return [((magnitude - count) / ADDABLE) * 1000, count]
}

/**
 * Pieces are parsed one by one: the whole run has more digits than a double keeps. A sync reads a
 * value per key it carries: digits are summed in place, no piece cut out.
 */
function unpackDigits(value: string, arity: number): number[] {
  const values: number[] = new Array(arity)
  const sizes = value.length - (arity - 1)
  let end = sizes
  for (let k = arity - 1; k >= 1; k--) {
    const size = value.charCodeAt(sizes + k - 1) - 48
    values[k] = digitsOf(value, end - size, end)
    end -= size
  }
  values[0] = digitsOf(value, 0, end)
  return values
}

/** The number the digits of `text` from `start` to `end` (excluded) spell; NaN for any other character or none. */
function digitsOf(text: string, start: number, end: number): number {
  if (start >= end || start < 0) return Number.NaN
  let n = 0
  for (let i = start; i < end; i++) {
    const digit = text.charCodeAt(i) - 48
    if (digit < 0 || digit > 9) return Number.NaN
    n = n * 10 + digit
  }
  return n
}
