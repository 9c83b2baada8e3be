import type { Decision, WindowState } from '../../rules/decision.js'
import type { Rule } from '../../rules/rules.js'
import { type DecisionObserver, STORE_ERROR_KINDS, type StoreErrorKind } from '../../store-calls/decision-observer.js'
import { describeValue, TollgateConfigError } from '../../support/errors.js'
import { checkOptionsObject, optionKeys } from '../../support/option-objects.js'
import { DEFAULT_DURATION_BUCKETS, type DurationCounts, DurationHistogram } from './duration-histogram.js'
import { NamesOfStates } from './names-of-states.js'
import { ALLOWED, DECISION_OUTCOMES, outcomeOf } from './outcomes.js'
import { OTHER_RULES, RuleLabels, windowLabel } from './rule-labels.js'

export interface DecisionCountsOptions {
  /**
   * Rule names counted under labels of their own. Decisions of every rule seen after these
   * are counted together under the rule `__other__`, so that the number of series stays bounded
   * whatever rules are loaded. Identifiers are never labels.
   * @default 200
   * @example { maxRules: 50 }
   */
  maxRules?: number
  /**
   * Times one `consume` decision in this many: reading the clock twice costs about as much as
   * counting the decision, so only a sample is timed. 0 times none.
   * @default 100
   * @example { timeEvery: 10 }
   */
  timeEvery?: number
  /**
   * Upper bounds, in seconds, of the buckets decision times are counted in, ascending.
   * @default [0.000001, 0.0000025, 0.000005, 0.00001, …, 0.1, 0.25] (DEFAULT_DURATION_BUCKETS)
   * @example { durationBuckets: [0.0001, 0.001, 0.01, 0.1] }
   */
  durationBuckets?: readonly number[]
}

export interface WindowCounts {
  /** The window's period in seconds, or `__other__` for the windows of rules past `maxRules`. @example '60s' */
  readonly window: string
  /**
   * Decisions this window refused or shed, or would have in dry run: once per decision, however
   * many of its identifiers the window refused.
   */
  readonly denials: number
}

export interface RuleCounts {
  /** The rule's name, or `__other__` for every rule past `maxRules`. @example 'auth.createToken' */
  readonly rule: string
  /**
   * `consume` decisions asked of the rule, by outcome, indexed as DECISION_OUTCOMES, as of the
   * `rules()` call that returned these counts. Read only.
   */
  readonly decisions: Float64Array
  /** Units those decisions asked for (their `cost`), by outcome, indexed as DECISION_OUTCOMES. Read only. */
  readonly units: Float64Array
  /** The rule's windows, its decisions' and those of the rules it is a parent of. */
  readonly windows: readonly WindowCounts[]
}

/**
 * A rule's cell, on the rule itself, for the counts that last made one for it: a property read
 * finds a decision's counts in about a nanosecond, where a WeakMap lookup by rule takes ten.
 * Other counts of the same rule (a second metrics package on the limiter) find theirs in the
 * WeakMap.
 */
const CELL = Symbol('tollgate.decisionCounts')

type RuleWithCell = Rule & { [CELL]?: RuleCell }

const OPTION_KEYS = optionKeys<DecisionCountsOptions>({ maxRules: true, timeEvery: true, durationBuckets: true })
const MAX_RULES_LIMIT = 10_000

class WindowTally implements WindowCounts {
  denials = 0
  /** The decision that last counted a denial here: a window refusing for two identifiers counts once. */
  #countedFor = 0

  /** Counts the denial of decision number `decision`, once however many identifiers it refused. */
  deny(decision: number): void {
    if (this.#countedFor === decision) return
    this.#countedFor = decision
    this.denials++
  }

  constructor(readonly window: string) {}
}

const OUTCOMES = DECISION_OUTCOMES.length

class RuleTally implements RuleCounts {
  /** Decisions by outcome, then units by outcome: one array for a decision to write in. */
  readonly counts = new Float64Array(2 * OUTCOMES)
  readonly decisions = this.counts.subarray(0, OUTCOMES)
  readonly units = this.counts.subarray(OUTCOMES)
  readonly windows: WindowTally[] = []

  constructor(readonly rule: string) {}

  windowOf(label: string): WindowTally {
    let tally = this.windows.find((window) => window.window === label)
    if (tally === undefined) {
      tally = new WindowTally(label)
      this.windows.push(tally)
    }
    return tally
  }
}

/**
 * Where one resolved rule's decisions count, found once per rule. Allowed decisions, nearly all
 * of them, count in the cell's own fields: the decision path then reads one object it holds
 * already, where the tally's arrays would be two more reads away. Reading the counts moves them
 * to the tally.
 */
class RuleCell {
  /** Allowed decisions (reason `ok`) and their units since the counts were last read. */
  allowed = 0
  allowedUnits = 0

  constructor(
    /** The counts this cell belongs to. */
    readonly owner: DecisionCounts,
    /** The rule's own, gone once nothing decides on it: its cell is then read one last time and dropped. */
    readonly rule: WeakRef<Rule>,
    /** The rule's tally's `counts`. */
    readonly counts: Float64Array,
    /** The names of the rule's chain, in the order decisions list their windows: its own, then its parent's… */
    readonly names: readonly string[],
    /** The tally of each rule of the chain. */
    readonly tallies: readonly RuleTally[],
  ) {}

  /** Adds what the cell counted to its tally; false once its rule is gone and nothing can count in it. */
  moveToTally(): boolean {
    const { counts } = this
    counts[ALLOWED] = (counts[ALLOWED] as number) + this.allowed
    counts[OUTCOMES + ALLOWED] = (counts[OUTCOMES + ALLOWED] as number) + this.allowedUnits
    this.allowed = 0
    this.allowedUnits = 0
    return this.rule.deref() !== undefined
  }
}

/**
 * Counts a limiter's decisions as they are made, in arrays allocated once per rule, for metrics
 * to read whenever they are collected: the decision path never calls a metrics library.
 * @example
 * const counts = new DecisionCounts({ maxRules: 50 })
 * const detach = limiter.observe(counts)
 * for (const rule of counts.rules()) console.log(rule.rule, rule.decisions[DECISION_OUTCOMES.indexOf('limited')])
 */
export class DecisionCounts implements DecisionObserver {
  readonly timeEvery: number
  /** Timed decisions, per bucket. */
  readonly durations: DurationCounts
  private readonly histogram: DurationHistogram
  private readonly labels: RuleLabels
  private readonly tallies = new Map<string, RuleTally>()
  /** By resolved rule, not by name: finding a decision's counts costs no string hashing. */
  private readonly cells = new WeakMap<Rule, RuleCell>()
  /** Every cell whose rule may still be decided on, for reads to move its counts to its tally. */
  private live: RuleCell[] = []
  /** A store counts by state name (`name@digest`); `totalsByRule` reads it as the rule's name. */
  private readonly namesOfStates = new NamesOfStates()
  private readonly errors = Object.fromEntries(STORE_ERROR_KINDS.map((kind) => [kind, 0])) as Record<
    StoreErrorKind,
    number
  >

  constructor(options: DecisionCountsOptions = {}) {
    const raw = checkOptionsObject(options, OPTION_KEYS, 'DecisionCounts options')
    const maxRules = raw.maxRules ?? 200
    if (typeof maxRules !== 'number' || !Number.isInteger(maxRules) || maxRules < 1 || maxRules > MAX_RULES_LIMIT) {
      throw new TollgateConfigError(
        `metrics option maxRules must be an integer from 1 to ${MAX_RULES_LIMIT}, got ${describeValue(maxRules)}`,
      )
    }
    const timeEvery = raw.timeEvery ?? 100
    if (typeof timeEvery !== 'number' || !Number.isSafeInteger(timeEvery) || timeEvery < 0) {
      throw new TollgateConfigError(
        `metrics option timeEvery must be a whole number ≥ 0 (0: time no decision), got ${describeValue(timeEvery)}`,
      )
    }
    this.labels = new RuleLabels(maxRules)
    this.timeEvery = timeEvery
    this.histogram = new DurationHistogram(bucketsOf(raw.durationBuckets ?? DEFAULT_DURATION_BUCKETS))
    this.durations = this.histogram
  }

  decided(rule: Rule, decision: Decision): void {
    const kept = (rule as RuleWithCell)[CELL]
    const cell = kept !== undefined && kept.owner === this ? kept : this.cellOf(rule)
    if (decision.reason === 'ok') {
      cell.allowed++
      cell.allowedUnits += decision.cost
    } else countOther(cell, decision)
  }

  timed(seconds: number): void {
    this.histogram.observe(seconds)
  }

  storeFailed(kind: StoreErrorKind): void {
    if (kind in this.errors) this.errors[kind]++
  }

  /** Store failures so far, by kind. */
  get storeErrors(): Readonly<Record<StoreErrorKind, number>> {
    return this.errors
  }

  /**
   * The counts of every rule label decided on so far, `__other__` included once used. Allowed
   * decisions are added to them as this is called: read the counts through a new call.
   */
  rules(): IterableIterator<RuleCounts> {
    this.live = this.live.filter((cell) => cell.moveToTally())
    return this.tallies.values()
  }

  /**
   * The label a rule name is counted under: itself, or `__other__` once `maxRules` names are
   * labelled. Metrics that carry a rule label from elsewhere (a HybridStore's) take it from here,
   * so that every rule label stays within the same bound.
   */
  ruleLabel(name: string): string {
    return this.labels.labelOf(name)
  }

  /**
   * Values that come by rule name from elsewhere (a HybridStore's, say), summed by the label each
   * name is counted under; every rule label decided on is there, at 0 when `values` has none. A
   * store counts by the rule's state name: one of a rule decided on is read as that rule's name.
   */
  totalsByRule(values: Iterable<[string, number]>): Map<string, number> {
    const totals = new Map<string, number>()
    for (const rule of this.tallies.values()) totals.set(rule.rule, 0)
    for (const [name, value] of values) {
      const label = this.labels.labelOf(this.namesOfStates.nameOf(name))
      totals.set(label, (totals.get(label) ?? 0) + value)
    }
    return totals
  }

  private cellOf(rule: Rule): RuleCell {
    let cell = this.cells.get(rule)
    if (cell === undefined) {
      cell = this.newCell(rule)
      this.cells.set(rule, cell)
      // Not enumerable: the rule reads, copies and prints as it did. A frozen rule keeps the WeakMap.
      if (Object.isExtensible(rule)) {
        Object.defineProperty(rule, CELL, { value: cell, writable: true, configurable: true, enumerable: false })
      }
    }
    return cell
  }

  private newCell(rule: Rule): RuleCell {
    this.namesOfStates.note(rule)
    const names = rule.chain.map((link) => link.name)
    const tallies = names.map((name) => this.tallyOf(name))
    // Each window listed from the start, refused or not; an override's windows join once they refuse.
    rule.chain.forEach((link, i) => {
      const tally = tallies[i] as RuleTally
      for (const window of link.windows)
        tally.windowOf(tally.rule === OTHER_RULES ? OTHER_RULES : windowLabel(window.periodMs))
    })
    const cell = new RuleCell(this, new WeakRef(rule), this.tallyOf(rule.name).counts, names, tallies)
    this.live.push(cell)
    return cell
  }

  private tallyOf(name: string): RuleTally {
    const label = this.labels.labelOf(name)
    let tally = this.tallies.get(label)
    if (tally === undefined) {
      tally = new RuleTally(label)
      this.tallies.set(label, tally)
    }
    return tally
  }
}

/** A decision of any reason but `ok`: by its outcome, and the windows that refused it or would have. */
function countOther(cell: RuleCell, decision: Decision): void {
  const outcome = outcomeOf(decision.reason)
  const { counts } = cell
  counts[outcome] = (counts[outcome] as number) + 1
  counts[OUTCOMES + outcome] = (counts[OUTCOMES + outcome] as number) + decision.cost
  if (decision.windows.length > 0) countDenials(cell, decision.windows)
}

/** Numbers the decisions whose denials are counted, so that a window counts once per decision. */
let denialCount = 0

/**
 * Counts each window of the chain that refused for any identifier, once. Decisions list windows
 * rule by rule in chain order; within a rule, by identifier (those it is charged on, each with the
 * rule's windows or an override's).
 */
function countDenials(cell: RuleCell, windows: readonly WindowState[]): void {
  const decision = ++denialCount
  let link = 0
  for (const window of windows) {
    while (link < cell.names.length && cell.names[link] !== window.rule) link++
    const tally = cell.tallies[link]
    if (tally === undefined) return
    if (!window.failed) continue
    tally.windowOf(tally.rule === OTHER_RULES ? OTHER_RULES : windowLabel(window.periodMs)).deny(decision)
  }
}

function bucketsOf(value: unknown): readonly number[] {
  const valid =
    Array.isArray(value) &&
    value.length > 0 &&
    value.every(
      (bound, i) =>
        typeof bound === 'number' && Number.isFinite(bound) && bound > 0 && (i === 0 || bound > value[i - 1]),
    )
  if (!valid) {
    throw new TollgateConfigError(
      `metrics option durationBuckets must be a non-empty array of ascending positive seconds, got ${describeValue(value)}`,
    )
  }
  return [...(value as number[])]
}
