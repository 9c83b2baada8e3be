import type { RuleBlock } from '../../rules/block.js'
import { chargesIdentifier, EVERYONE } from '../../rules/charged-by.js'
import type { AlgorithmName, Rule, Window } from '../../rules/rules.js'
import { describeValue, TollgateArgumentError } from '../../support/errors.js'
import type { StoreTarget } from '../store.js'

/** A call's identifiers: one as given, without an array made around it, or several. */
export type Identifiers = string | readonly string[]

/**
 * One target of a decision made in the process, written in place by `fillTargets`: the decision
 * runs to its end before another begins, so each decision reuses the same few rather than
 * making its own. `link` is the rule of the chain it belongs to, whose name the decision reports.
 */
export class TargetSlot implements StoreTarget {
  rule = ''
  algorithm: AlgorithmName = 'fixed-window'
  windows: readonly Window[] = []
  identifier = ''
  block: RuleBlock | undefined = undefined
  declare link: Rule
}

/**
 * The targets of one decision in rule order, then identifier order: one per rule and identifier
 * it charges (a rule's `by`: those of its kinds, or one shared by everyone). A target names the
 * state of the rule's windows, or of an override's for that identifier. Written into `into` from
 * its start, slots made as needed; how many were written. `blocks`: targets carry their rule's
 * block, for a decision that enforces it.
 */
export function fillTargets(
  chain: readonly Rule[],
  identifiers: Identifiers,
  blocks: boolean,
  into: TargetSlot[],
): number {
  const one = typeof identifiers === 'string'
  const count = one ? 1 : identifiers.length
  let t = 0
  for (let l = 0; l < chain.length; l++) {
    const link = chain[l] as Rule
    const { by } = link
    if (by !== undefined && by.length === 0) {
      fill(into, t++, link, EVERYONE, blocks)
      continue
    }
    const first = t
    for (let i = 0; i < count; i++) {
      const identifier = one ? identifiers : (identifiers[i] as string)
      if (by === undefined || chargesIdentifier(by, identifier)) fill(into, t++, link, identifier, blocks)
    }
    if (t === first) throw unchargeable(link, identifiers)
  }
  return t
}

function fill(into: TargetSlot[], t: number, link: Rule, identifier: string, blocks: boolean): void {
  let slot = into[t]
  if (slot === undefined) {
    slot = new TargetSlot()
    into[t] = slot
  }
  const override = link.overrides?.of(identifier)
  slot.rule = override === undefined ? link.stateName : override.stateName
  slot.algorithm = link.algorithm
  slot.windows = override === undefined ? link.windows : override.windows
  slot.identifier = identifier
  slot.block = blocks ? link.block : undefined
  slot.link = link
}

/** The slots `targetsOf` fills, reused: it copies them out before it returns. */
const scratch: TargetSlot[] = []

/**
 * A decision's targets as objects of their own, for a store that is asked with a request (one
 * that answers later, or through `evaluateSync`): `fillTargets`' targets, copied.
 */
export function targetsOf(
  rules: readonly Rule[],
  identifiers: Identifiers,
  /** `blocks`: targets carry their rule's block (StoreTarget.block), for a decision that enforces it. */
  { blocks = false }: { blocks?: boolean } = {},
): StoreTarget[] {
  const count = fillTargets(rules, identifiers, blocks, scratch)
  const targets: StoreTarget[] = new Array(count)
  for (let t = 0; t < count; t++) {
    const { rule, algorithm, windows, identifier, block } = scratch[t] as TargetSlot
    // Made whole at once, `block` only when it is enforced: an object spread into another costs a
    // decision more than the rest of it.
    targets[t] =
      block === undefined ? { rule, algorithm, windows, identifier } : { rule, algorithm, windows, identifier, block }
  }
  return targets
}

function unchargeable(link: Rule, identifiers: Identifiers): TollgateArgumentError {
  const given = typeof identifiers === 'string' ? [identifiers] : identifiers
  const kinds = (link.by as readonly string[]).map((kind) => `'${kind}'`).join(' or ')
  return new TollgateArgumentError(
    `rule '${link.name}' is charged on identifiers of kind ${kinds}, and the decision gives none: ${given.map((id) => describeValue(id)).join(', ')}`,
  )
}
