import { type AlgorithmName, decodeLockoutState, type Rule, type StoreTarget, targetsOf } from '@tollgate/core'
import type { CommandModule } from '../command.js'
import { isoTime, span, windowText } from '../format.js'
import { limiterAnswer } from '../limiter-answer.js'
import { ruleNamed } from '../rule-named.js'
import type { Session } from '../session.js'

/** `tollgate inspect --json`: one entry per window of the rule and its parents, per identifier. */
export interface InspectResult {
  rule: string
  source: 'live' | 'file'
  epoch: number
  /** When Redis answered (its clock), ms since the Unix epoch. */
  nowMs: number
  windows: InspectedWindow[]
  /** The blocks in force (a rule's `block`) on the rule and its parents for these identifiers. */
  blocks: InspectedBlock[]
}

export interface InspectedBlock {
  rule: string
  identifier: string
  /** When the block ends, ms since the Unix epoch. */
  untilMs: number
  key: string
}

export interface InspectedWindow {
  rule: string
  identifier: string
  algorithm: AlgorithmName
  limit: number
  periodMs: number
  used: number
  remaining: number
  /** When the window next frees a unit, ms since the Unix epoch; `nowMs` when nothing is used. */
  resetAtMs: number
  /** The key's PTTL: null when the key does not exist (nothing counted), -1 when it has no expiry. */
  ttlMs: number | null
  key: string
}

export const inspect: CommandModule = {
  register(program, run) {
    program
      .command('inspect')
      .description('show every window of a rule and its parents for identifiers, charging nothing')
      .argument('<rule>', 'rule name')
      .argument('<identifier...>', 'identifiers as the limiter takes them, such as ip:203.0.113.7 or user:42')
      .action(
        run(async (session: Session, rule: string, identifiers: string[]) => {
          session.out.result(await inspected(session, rule, identifiers), (result) => render(session, result))
        }),
      )
  },
}

async function inspected(session: Session, name: string, identifiers: string[]): Promise<InspectResult> {
  const set = await session.ruleSet()
  const { limiter, store } = set.limiter()
  ruleNamed(limiter.rules, name)
  // Cost 0: the windows as they stand, not as one more unit would leave them; a peek writes nothing.
  const decision = limiterAnswer(await limiter.peek(name, identifiers, { cost: 0, onStoreError: 'deny' }))
  const rules = limiter.rules
  // The state of the rule's windows, or of an override's for that identifier.
  const keyOf = (rule: Rule, identifier: string) => store.keyOf(targetsOf([rule], identifier)[0] as StoreTarget)
  const { client } = await session.redis()
  const keys = [...new Set(decision.windows.map((w) => keyOf(rules.get(w.rule) as Rule, w.identifier)))]
  const ttls = new Map(await Promise.all(keys.map(async (key) => [key, await client.pttl(key)] as const)))
  const blocks = await blocksInForce(
    client,
    decision.nowMs,
    uniquePairs(decision.windows)
      .filter(({ rule }) => rules.get(rule)?.block !== undefined)
      .map(({ rule, identifier }) => ({
        rule,
        identifier,
        key: `${keyOf(rules.get(rule) as Rule, identifier)}:block`,
      })),
  )
  return {
    blocks,
    rule: name,
    source: set.source,
    epoch: set.epoch,
    nowMs: decision.nowMs,
    windows: decision.windows.map((window) => {
      const rule = rules.get(window.rule) as Rule
      const key = keyOf(rule, window.identifier)
      const ttl = ttls.get(key) as number
      return {
        rule: window.rule,
        identifier: window.identifier,
        algorithm: rule.algorithm,
        limit: window.limit,
        periodMs: window.periodMs,
        used: window.limit - window.remaining,
        remaining: window.remaining,
        resetAtMs: window.resetAtMs,
        ttlMs: ttl === -2 ? null : ttl,
        key,
      }
    }),
  }
}

function uniquePairs(windows: ReadonlyArray<{ rule: string; identifier: string }>) {
  const seen = new Map<string, { rule: string; identifier: string }>()
  for (const { rule, identifier } of windows) seen.set(`${rule}\n${identifier}`, { rule, identifier })
  return [...seen.values()]
}

async function blocksInForce(
  client: { get(key: string): Promise<string | null> },
  nowMs: number,
  candidates: ReadonlyArray<{ rule: string; identifier: string; key: string }>,
): Promise<InspectedBlock[]> {
  const blocks: InspectedBlock[] = []
  for (const candidate of candidates) {
    const text = await client.get(candidate.key)
    const state = text === null ? undefined : decodeLockoutState(text)
    if (state !== undefined && state.until > nowMs) blocks.push({ ...candidate, untilMs: state.until })
  }
  return blocks
}

function render(session: Session, result: InspectResult): string {
  const { color } = session.out
  const source = result.source === 'live' ? `live rules, epoch ${result.epoch}` : 'rules file'
  const heading = color.dim(`${result.rule} at ${isoTime(result.nowMs)} (${source})`)
  const rows = session.out.table<InspectedWindow>(
    [
      { header: 'RULE', value: (w) => w.rule },
      { header: 'IDENTIFIER', value: (w) => w.identifier },
      { header: 'ALGORITHM', value: (w) => w.algorithm },
      { header: 'WINDOW', value: (w) => windowText(w) },
      { header: 'USED', value: (w) => String(w.used), align: 'right' },
      {
        header: 'REMAINING',
        value: (w) => (w.remaining === 0 ? color.red('0') : String(w.remaining)),
        align: 'right',
      },
      {
        header: 'RESET',
        value: (w) => (w.resetAtMs <= result.nowMs ? 'now' : `in ${span(w.resetAtMs - result.nowMs)}`),
        align: 'right',
      },
      { header: 'TTL', value: (w) => ttlText(w.ttlMs), align: 'right' },
      { header: 'KEY', value: (w) => color.dim(w.key) },
    ],
    result.windows,
  )
  const blocks = result.blocks.map((block) =>
    color.red(
      `blocked: ${block.rule} for ${block.identifier} until ${isoTime(block.untilMs)} (in ${span(block.untilMs - result.nowMs)})`,
    ),
  )
  return [heading, rows, ...blocks].join('\n')
}

function ttlText(ttlMs: number | null): string {
  if (ttlMs === null) return '-'
  if (ttlMs === -1) return 'none'
  return span(ttlMs)
}
