import calculateSlot from 'cluster-key-slot'
import type {
  StoreOperation,
  StoreReceiver,
  StoreRequest,
  StoreResult,
  StoreTarget,
  StoreWindowResult,
} from '../store.js'

/**
 * A decision whose keys live in several Cluster slots: Redis runs a script on one slot only, so
 * each slot's part is decided on its own, and these put the parts back into one decision.
 */

/**
 * Decides one slot's part: its keys and targets, as one script run, with the decision's random
 * number if any. `asker`, the whole decision's receiver, is told when the part goes on the wire.
 */
export type RunOnSlot = (
  operation: StoreOperation | 'undo',
  keys: readonly string[],
  targets: readonly StoreTarget[],
  cost: number,
  time: string,
  random: number | undefined,
  asker?: StoreReceiver,
) => Promise<StoreResult>

interface SlotPart {
  /** The part's targets' places in the decision. */
  indices: readonly number[]
  keys: readonly string[]
  targets: readonly StoreTarget[]
}

/** The keys' indices grouped by slot, in ascending slot order: the order a consume charges slots in. */
export function groupBySlot(keys: readonly string[]): number[][] {
  const bySlot = new Map<number, number[]>()
  keys.forEach((key, i) => {
    const slot = calculateSlot(key)
    const group = bySlot.get(slot)
    if (group) group.push(i)
    else bySlot.set(slot, [i])
  })
  return [...bySlot.entries()].sort(([a], [b]) => a - b).map(([, indices]) => indices)
}

/**
 * A consume charges slot after slot, so that a slot is only asked once every slot before it has
 * admitted; the first refusal stops it and the slots that charged are undone. Asked all at once,
 * a slot would refuse concurrent decisions on units held by charges about to be undone, and admit
 * fewer than the limit. The price is a round trip per extra slot. A peek, a refund or a consume
 * of nothing charges nothing another slot could refuse: every slot at once.
 */
export async function decideAcrossSlots(
  request: StoreRequest,
  keys: readonly string[],
  slots: readonly number[][],
  time: string,
  run: RunOnSlot,
  asker?: StoreReceiver,
): Promise<StoreResult> {
  const { operation, targets, cost, random } = request
  const parts: SlotPart[] = slots.map((indices) => ({
    indices,
    keys: indices.map((i) => keys[i] as string),
    targets: indices.map((i) => targets[i] as StoreTarget),
  }))
  if (operation !== 'consume' || cost === 0) {
    const results = await Promise.all(
      parts.map((part) => run(operation, part.keys, part.targets, cost, time, random, asker)),
    )
    return mergeSlots(
      parts,
      results,
      results.every((result) => result.allowed),
      targets.length,
    )
  }
  const charged: StoreResult[] = []
  let refusal: StoreResult | undefined
  try {
    for (const part of parts) {
      const result = await run('consume', part.keys, part.targets, cost, time, random, asker)
      if (!result.allowed) {
        refusal = result
        break
      }
      charged.push(result)
    }
  } catch (error) {
    // A failed undo leaves units charged until they expire: quota lost, never a limit exceeded.
    await Promise.allSettled(undoParts(parts, charged, cost, run))
    throw error
  }
  if (refusal === undefined) {
    const merged = mergeSlots(parts, charged, true, targets.length)
    merged.revert = async () => {
      await Promise.all(undoParts(parts, charged, cost, run))
    }
    return merged
  }
  // The slots after the refusing one were never charged; a peek gives their windows, which
  // the decision reports too (and which say whether they would have refused as well).
  const unasked = parts.slice(charged.length + 1)
  const [undone, peeked] = await Promise.all([
    Promise.all(
      undoParts(parts, charged, cost, run, asker).map((undo, i) => undo.catch(() => charged[i] as StoreResult)),
    ),
    Promise.all(unasked.map((part) => run('peek', part.keys, part.targets, cost, time, random, asker))),
  ])
  return mergeSlots(parts, [...undone, refusal, ...peeked], false, targets.length)
}

/** Takes back `charged[i]` on `parts[i]`, every slot at once; each answers its slot's state after. */
function undoParts(
  parts: readonly SlotPart[],
  charged: readonly StoreResult[],
  cost: number,
  run: RunOnSlot,
  asker?: StoreReceiver,
): Array<Promise<StoreResult>> {
  return charged.map((result, i) => {
    const part = parts[i] as SlotPart
    return run('undo', part.keys, part.targets, cost, String(result.nowMs), undefined, asker)
  })
}

/**
 * Puts per-slot answers back in target order, on the first slot's clock (nodes' clocks may differ).
 * A refusal is blocked when any slot's block refused it. It is a shed only when no slot is limited, since a limit wins over shedding as it does
 * within one script. A slot that shed had room in every window, so when another slot is limited
 * its windows answer that the cost fits now, as one script deciding the whole would have.
 */
function mergeSlots(
  parts: readonly SlotPart[],
  results: readonly StoreResult[],
  allowed: boolean,
  targetCount: number,
): StoreResult {
  const nowMs = (results[0] as StoreResult).nowMs
  const blocked = !allowed && results.some((result) => result.blocked)
  const shed =
    !allowed && !blocked && results.some((result) => result.shed) && results.every((r) => r.allowed || r.shed)
  const byTarget: StoreWindowResult[][] = new Array(targetCount)
  parts.forEach((part, p) => {
    const result = results[p] as StoreResult
    const shift = nowMs - result.nowMs
    const fitsNow = result.shed === true && !shed
    let w = 0
    part.indices.forEach((targetIndex, t) => {
      const windows = (part.targets[t] as StoreTarget).windows.length
      byTarget[targetIndex] = result.windows.slice(w, w + windows).map((window) => ({
        remaining: window.remaining,
        resetAtMs: window.resetAtMs + shift,
        fitsAtMs: fitsNow ? nowMs : window.fitsAtMs + shift,
      }))
      w += windows
    })
  })
  if (shed) return { allowed, shed, nowMs, windows: byTarget.flat() }
  if (blocked) return { allowed, blocked, nowMs, windows: byTarget.flat() }
  return { allowed, nowMs, windows: byTarget.flat() }
}
