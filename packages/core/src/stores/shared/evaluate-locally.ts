import { CLAMPED, LIMITED, type Settled, SHEDS } from '../../algorithms/algorithm.js'
import { algorithms } from '../../algorithms/index.js'
import { afterRefusal, blockedUntil, type LockoutState, lockoutExpiresAt } from '../../algorithms/lockout.js'
import type { StoreOperation, StoreRequest, StoreResult, StoreTarget, StoreWindowResult } from '../store.js'

/** In-process state: what a local store keeps per key (a key string, or whatever the store finds its state by). */
export interface StateTable<Key = string> {
  get(key: Key, now: number): unknown
  set(key: Key, state: unknown, expiresAt: number): void
  delete(key: Key): void
}

/** Where an in-process store keeps its targets' blocks (StoreTarget.block), apart from their windows' state. */
export interface LockoutTable {
  get(target: StoreTarget, now: number): LockoutState | undefined
  set(target: StoreTarget, state: LockoutState, expiresAt: number): void
}

/**
 * Each target's state between `read` and `settle`, reused by every decision: a decision runs to
 * its end before another can begin, so it needs no array of its own (`pnpm bench --only
 * allocation` measures what a decision allocates). Emptied as it is read, so that it keeps no
 * state alive.
 */
let states: unknown[] = []

/** What each target's `settle` leaves, reused as `states` is; emptied once the decision is made. */
const settled: Settled = { state: undefined, expiresAt: 0 }

/** What `decideLocally` answers besides its windows' answers: bits. */
export const ALLOWED = 1
/** …every window fitted, but the decision was shed. */
export const SHED = 2
/** …a target's block refused it. */
export const BLOCKED = 4

/** What a decision made in the process asks of its targets. */
export interface LocalAsk {
  readonly operation: StoreOperation
  readonly cost: number
  /** The decision's random number, when it can shed. */
  readonly random?: number | undefined
}

/**
 * The all-or-nothing decision over in-process state: the same steps, in the same order, as
 * `lua/decide.lua`. Synchronous, so no other decision can interleave with it. Each target's
 * algorithm is asked twice, `read` and `settle`, whatever its windows. Each window's answer goes
 * into `windows`, targets in order, windows in rule order; the bits ALLOWED, SHED, BLOCKED.
 * `count`: how many of `targets` (and `keys`) are the decision's, where a store reuses them.
 */
export function decideLocally<Key>(
  table: StateTable<Key>,
  keys: readonly Key[],
  ask: LocalAsk,
  targets: readonly StoreTarget[],
  count: number,
  now: number,
  windows: StoreWindowResult[],
  /** The store's blocks; without it, targets' `block` is not enforced (an outage's local counts). */
  lockouts?: LockoutTable,
): number {
  const { operation, cost } = ask
  const refund = operation === 'refund'
  // Charged whether it fits or not (a reservation settled above its estimate): allowed, as a refund is.
  const forced = refund || operation === 'charge'
  // Only a decision that can shed carries a random number: one that refunds or charges never does.
  const random = forced ? undefined : ask.random
  // Plain loops, no closures: this is the whole cost of an in-process decision.
  if (states.length < count) states = new Array(count)
  // A state a faster clock stamped after now is moved back to now, and written even if nothing
  // is charged: otherwise it would hold this clock back for as long as the clocks disagree.
  let clamped: boolean[] | undefined
  let found = 0
  // Whether a target carries a block: a decision of rules without one asks the lockouts nothing.
  let blocking = false
  for (let t = 0; t < count; t++) {
    const { algorithm, windows: its, block } = targets[t] as StoreTarget
    if (block !== undefined) blocking = true
    const state = table.get(keys[t] as Key, now)
    states[t] = state
    const bits = algorithms[algorithm].read(state, its, now, cost, random)
    if ((bits & CLAMPED) !== 0) {
      clamped ??= []
      clamped[t] = true
    }
    found |= bits
  }
  // A block in force refuses before the windows are asked anything more.
  const blocked = blocking && lockouts !== undefined && !forced && blockedTarget(lockouts, targets, count, now)
  // Only a decision that fits may be shed: one that does not is limited, whatever the draw.
  const allowed = forced || ((found & LIMITED) === 0 && !blocked)
  const shed = allowed && (found & SHEDS) !== 0
  const delta = cost === 0 || shed ? 0 : refund ? -1 : operation !== 'peek' && allowed ? 1 : 0
  let w = 0
  for (let t = 0; t < count; t++) {
    const target = targets[t] as StoreTarget
    const algorithm = algorithms[target.algorithm]
    const before = states[t]
    states[t] = undefined
    algorithm.settle(before, target.windows, now, cost, delta, shed ? random : undefined, windows, w, settled)
    w += target.windows.length
    if (delta !== 0 || clamped?.[t] === true) {
      if (settled.expiresAt > now) table.set(keys[t] as Key, settled.state, settled.expiresAt)
      else table.delete(keys[t] as Key)
    }
  }
  settled.state = undefined
  if (shed) return SHED
  if (blocking && lockouts !== undefined && !allowed && (blocked || operation === 'consume')) {
    if (settleLockouts(lockouts, targets, count, windows, now, blocked)) return BLOCKED
  }
  return allowed ? ALLOWED : 0
}

/** `decideLocally`'s answer to a store's request, as a StoreResult. */
export function evaluateLocally<Key>(
  table: StateTable<Key>,
  keys: readonly Key[],
  request: StoreRequest,
  now: number,
  lockouts?: LockoutTable,
): StoreResult {
  const { targets } = request
  let windowCount = 0
  for (const target of targets) windowCount += target.windows.length
  // Sized up front: the first push into an empty array reserves room for 17.
  const windows: StoreWindowResult[] = new Array(windowCount)
  const bits = decideLocally(table, keys, request, targets, targets.length, now, windows, lockouts)
  if (bits === SHED) return { allowed: false, shed: true, nowMs: now, windows }
  if (bits === BLOCKED) return { allowed: false, blocked: true, nowMs: now, windows }
  return { allowed: bits === ALLOWED, nowMs: now, windows }
}

function blockedTarget(lockouts: LockoutTable, targets: readonly StoreTarget[], count: number, now: number): boolean {
  for (let t = 0; t < count; t++) {
    const target = targets[t] as StoreTarget
    if (target.block !== undefined && blockedUntil(lockouts.get(target, now), now) > 0) return true
  }
  return false
}

/**
 * After a refusal, the same steps as lua/lib/lockout.lua: a block in force (`blocked`) marks its
 * window failed until it ends; otherwise, each target with a block whose windows refused counts
 * the refusal, and one that reaches `after` starts a block. Whether a block refused the decision.
 */
function settleLockouts(
  lockouts: LockoutTable,
  targets: readonly StoreTarget[],
  count: number,
  windows: StoreWindowResult[],
  now: number,
  blocked: boolean,
): boolean {
  let refusedByBlock = blocked
  let w = 0
  for (let t = 0; t < count; t++) {
    const target = targets[t] as StoreTarget
    const first = w
    const windowCount = target.windows.length
    w += windowCount
    const { block } = target
    if (block === undefined) continue
    const state = lockouts.get(target, now)
    let until = blockedUntil(state, now)
    let window = state?.window ?? 0
    if (until === 0) {
      // A decision a block refused counts no refusal toward another.
      if (blocked) continue
      let failed = -1
      for (let k = 0; k < windowCount; k++) {
        if ((windows[first + k] as StoreWindowResult).fitsAtMs > now) {
          failed = k
          break
        }
      }
      if (failed < 0) continue
      const next = afterRefusal(state, block, target.windows, now, failed)
      lockouts.set(target, next, lockoutExpiresAt(next, target.windows))
      until = blockedUntil(next, now)
      if (until === 0) continue
      window = failed
      refusedByBlock = true
    }
    const answer = windows[first + Math.min(window, windowCount - 1)] as StoreWindowResult
    if (answer.fitsAtMs < until) answer.fitsAtMs = until
  }
  return refusedByBlock
}
