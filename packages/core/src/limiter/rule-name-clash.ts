import type { Rule } from '../rules/rules.js'
import type { Store } from '../stores/store.js'
import { formatDuration } from '../support/duration.js'
import type { WarningHandler } from '../support/process-warning.js'

/**
 * Limiters that share a store share the state of their rules of one name and shape: a rule's keys
 * are its `stateName` (rules/state-name.ts), its name and a digest of its algorithm and periods,
 * and a bucket's limits. Two rules of one name with other periods or another algorithm keep
 * apart; two counters of one name and the same periods but other limits read and charge the same
 * keys, each admitting by its own limits on counts both add to. That is what warns
 * (`TG_RULE_NAME_CLASH`): when a limiter is made, or live rules change one, against the others on
 * the same Store object, or on a view of it (a route's limiter on its app's store). Two store
 * objects over one Redis and prefix are not compared: a store does not say where its keys live.
 */

/** What the registry reads of a limiter on a store. */
export interface RulesOnStore {
  /** The rules in force now: live rules replace them. */
  rules(): ReadonlyMap<string, Rule>
  /** Closed limiters leave the registry as they are met. */
  closed(): boolean
  /** The live rules it follows: limiters following the same ones change together. */
  readonly live: object | undefined
}

/**
 * The limiters on one store, each held weakly, so that limiters made and dropped (one per request,
 * say) do not stay: those that follow live rules one by one, the others by the rule set they hold,
 * which never changes, so that a thousand limiters of one set are compared once.
 */
interface OnStore {
  readonly fixed: Map<string, { readonly rules: ReadonlyMap<string, Rule>; readonly limiters: Set<WeakRef<object>> }>
  readonly following: Set<WeakRef<object>>
}

const onStore = new WeakMap<Store, OnStore>()
/** What each limiter registered shows of itself, for as long as the limiter lives. */
const shown = new WeakMap<object, RulesOnStore>()
/** Stores that only pass decisions to another (a route's view of its app's store), and that other. */
const viewed = new WeakMap<Store, Store>()

/** `view` decides on `store`'s state: its limiters are compared with `store`'s. */
export function viewsStateOf(view: Store, store: Store): void {
  viewed.set(view, stateHolder(store))
}

export function holdRules(store: Store, limiter: object, rules: RulesOnStore): void {
  const holder = stateHolder(store)
  let held = onStore.get(holder)
  if (held === undefined) {
    held = { fixed: new Map(), following: new Set() }
    onStore.set(holder, held)
  }
  shown.set(limiter, rules)
  if (rules.live !== undefined) {
    held.following.add(new WeakRef(limiter))
    return
  }
  const set = rules.rules()
  const key = signatureOf(set)
  let group = held.fixed.get(key)
  if (group === undefined) {
    group = { rules: set, limiters: new Set() }
    held.fixed.set(key, group)
  }
  group.limiters.add(new WeakRef(limiter))
}

/**
 * Warns of each rule of `rules` that another limiter on `store` keeps under the same state name
 * with other limits. `live` is the live rules `rules` came from: limiters following them, this
 * one among them, are left out, since they move to one rule set together.
 */
export function warnOfClashes(
  store: Store,
  rules: ReadonlyMap<string, Rule>,
  live: object | undefined,
  warn: WarningHandler,
): void {
  const held = onStore.get(stateHolder(store))
  if (held === undefined) return
  const others: Array<ReadonlyMap<string, Rule>> = []
  for (const [key, group] of held.fixed) {
    if (anyOpen(group.limiters) === undefined) held.fixed.delete(key)
    else others.push(group.rules)
  }
  for (const limiter of held.following) {
    const open = openOne(limiter)
    if (open === undefined) held.following.delete(limiter)
    else if (open.live !== live) others.push(open.rules())
  }
  if (others.length === 0) return
  for (const rule of rules.values()) {
    for (const theirs of others) {
      const other = theirs.get(rule.name)
      if (other === undefined || other.stateName !== rule.stateName || sameLimits(rule, other)) continue
      warn(clash(rule, other), 'TG_RULE_NAME_CLASH')
      break
    }
  }
}

/** One limiter of the group still open, those gone or closed forgotten on the way. */
function anyOpen(limiters: Set<WeakRef<object>>): RulesOnStore | undefined {
  for (const limiter of limiters) {
    const open = openOne(limiter)
    if (open !== undefined) return open
    limiters.delete(limiter)
  }
  return undefined
}

function openOne(limiter: WeakRef<object>): RulesOnStore | undefined {
  const target = limiter.deref()
  const rules = target === undefined ? undefined : shown.get(target)
  return rules === undefined || rules.closed() ? undefined : rules
}

/** What a comparison reads of a rule set: its state names and limits. */
function signatureOf(rules: ReadonlyMap<string, Rule>): string {
  let signature = ''
  for (const rule of rules.values()) signature += `${rule.stateName}=${rule.windows.map((w) => w.limit).join(',')} `
  return signature
}

function stateHolder(store: Store): Store {
  return viewed.get(store) ?? store
}

/**
 * The same state name means the same algorithm and periods, in order: what is left to differ is
 * each window's limit. Shedding (`lowBurst`) is left out: it refuses some requests below the
 * limit, and a limiter that sheds beside one that does not still agrees on when a client is over.
 */
function sameLimits(rule: Rule, other: Rule): boolean {
  return rule.windows.every((window, i) => window.limit === other.windows[i]?.limit)
}

function clash(rule: Rule, other: Rule): string {
  return `rule '${rule.name}' counts ${limitsOf(rule)} here and ${limitsOf(other)} in another limiter on the same store: one name, algorithm and periods are one state, so each limiter admits by its own limits on counts both charge; give one of the rules another name, or one of the limiters a store of its own (on Redis, a prefix of its own), or both the same limits`
}

function limitsOf(rule: Rule): string {
  return rule.windows.map((window) => `${window.limit}/${formatDuration(window.periodMs)}`).join(', ')
}
