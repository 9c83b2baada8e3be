import { existsSync, readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { parse } from 'yaml'
import type { Duration } from '../support/duration.js'
import { describeValue, TollgateConfigError } from '../support/errors.js'
import { checkOptionsObject, isPlainObject, optionKeys, rejectUnknownKeys } from '../support/option-objects.js'
import type { RuleOptions, RulesOptions } from './rules.js'

type RulesFileWindows = ReadonlyArray<{ limit: number; period: number | string; lowBurst?: number }>

/** One item of a rules file's `limits`: a rule, its windows under `config`, periods in seconds. */
interface RulesFileLimit extends Omit<RuleOptions, 'windows' | 'overrides'> {
  name: string
  config: RulesFileWindows
  overrides?: Readonly<Record<string, { config: RulesFileWindows }>>
}

const LIMIT_KEYS = optionKeys<RulesFileLimit>({
  name: true,
  config: true,
  algorithm: true,
  parent: true,
  onStoreError: true,
  dryRun: true,
  by: true,
  overrides: true,
  block: true,
})
const OVERRIDE_KEYS = optionKeys<{ config: RulesFileWindows }>({ config: true })
const WINDOW_KEYS = optionKeys<RulesFileLimit['config'][number]>({ limit: true, period: true, lowBurst: true })

/**
 * Reads rules from YAML or JSON text, or from a file path (or `file:` URL), in this form:
 *
 * ```yaml
 * limits:
 *   - name: auth.createToken
 *     algorithm: sliding-log      # optional
 *     parent: auth                # optional
 *     onStoreError: deny          # optional: allow, deny or local
 *     dryRun: true                # optional: never refuse, only report (Envoy's shadow_mode)
 *     config:
 *       - { limit: 20, period: 60 }   # period in seconds, or a duration such as '500ms', '15 minutes'
 *       - { limit: 5, period: 3 }
 *   - name: search
 *     config:
 *       - { limit: 100, period: 60, lowBurst: 50 }   # optional: shed between 50 and 100 (README, "Shedding")
 *   - name: org
 *     by: [org]                   # optional: charged on these identifier kinds only ([]: one count for all)
 *     config:
 *       - { limit: 100, period: 60 }
 *     overrides:                  # optional: other windows for some identifiers, or patterns with *
 *       'org:acme': { config: [{ limit: 500, period: 60 }] }
 *   - name: login
 *     block: { for: 900, after: 3, factor: 2, max: 86400 }   # optional: lockout, durations in seconds
 *     config:
 *       - { limit: 5, period: 900 }
 * ```
 * The result is what `createLimiter({ rules })` takes; rule values are checked there.
 */
export function loadRules(source: string | URL): RulesOptions {
  const { text, origin } = readSource(source)
  let document: unknown
  try {
    document = parse(text)
  } catch (error) {
    throw new TollgateConfigError(`${origin} is neither a rules file nor valid YAML/JSON: ${whereParsingFailed(error)}`)
  }
  if (!isPlainObject(document) || !Array.isArray(document.limits)) {
    throw new TollgateConfigError(
      `${origin} must hold an object with a 'limits' list (or name a file that does), got ${shapeOf(document)}`,
    )
  }
  rejectUnknownKeys(document, new Set(['limits']), origin)
  // No prototype, so a rule named '__proto__' is a rule like any other.
  const rules: Record<string, RuleOptions> = Object.create(null)
  document.limits.forEach((item: unknown, index: number) => {
    const where = `${origin}: limits[${index}]`
    const { name, config, algorithm, parent, onStoreError, dryRun, by, overrides, block } = checkOptionsObject(
      item,
      LIMIT_KEYS,
      where,
    )
    if (typeof name !== 'string' || name.length === 0) {
      throw new TollgateConfigError(`${where}: name must be a non-empty string, got ${describeValue(name)}`)
    }
    if (Object.hasOwn(rules, name)) throw new TollgateConfigError(`${where}: rule '${name}' is defined twice`)
    const windows = windowsOf(config, `${where} ('${name}')`)
    // Values are checked by createLimiter, which names the rule and window.
    rules[name] = {
      windows,
      ...(algorithm === undefined ? {} : { algorithm: algorithm as RuleOptions['algorithm'] }),
      ...(parent === undefined ? {} : { parent: parent as string }),
      ...(onStoreError === undefined ? {} : { onStoreError: onStoreError as RuleOptions['onStoreError'] }),
      ...(dryRun === undefined ? {} : { dryRun: dryRun as boolean }),
      ...(by === undefined ? {} : { by: by as string[] }),
      ...(overrides === undefined ? {} : { overrides: overridesOf(overrides, `${where} ('${name}')`) }),
      ...(block === undefined ? {} : { block: blockOf(block, `${where} ('${name}'), block`) }),
    }
  })
  return rules
}

function windowsOf(config: unknown, where: string): RuleOptions['windows'] {
  if (!Array.isArray(config)) {
    throw new TollgateConfigError(`${where}: config must be a list of { limit, period }, got ${describeValue(config)}`)
  }
  return config.map((window: unknown, w: number) => {
    const at = `${where}, config[${w}]`
    const { limit, period, lowBurst } = checkOptionsObject(window, WINDOW_KEYS, at, { shape: '{ limit, period }' })
    return {
      limit: limit as number,
      period: secondsToPeriod(period, at),
      ...(lowBurst === undefined ? {} : { lowBurst: lowBurst as number }),
    }
  })
}

/** A block's durations in seconds, as periods are; the rest is checked by createLimiter. */
function blockOf(raw: unknown, where: string): RuleOptions['block'] {
  if (!isPlainObject(raw)) return raw as RuleOptions['block']
  const block: Record<string, unknown> = { ...raw }
  for (const field of ['for', 'max'] as const) {
    if (block[field] !== undefined) block[field] = secondsToPeriod(block[field], `${where}.${field}`)
  }
  return block as unknown as RuleOptions['block']
}

/** Each override's windows under `config`, as a rule's are; keys are checked by createLimiter. */
function overridesOf(raw: unknown, where: string): RuleOptions['overrides'] {
  if (!isPlainObject(raw)) {
    throw new TollgateConfigError(
      `${where}: overrides must map identifiers or patterns to { config: [...] }, got ${describeValue(raw)}`,
    )
  }
  // No prototype, so an override keyed '__proto__' is one like any other.
  const overrides: Record<string, { windows: RuleOptions['windows'] }> = Object.create(null)
  for (const key of Object.keys(raw)) {
    const at = `${where}, overrides['${key}']`
    const { config } = checkOptionsObject(raw[key], OVERRIDE_KEYS, at, { shape: '{ config }' })
    overrides[key] = { windows: windowsOf(config, at) }
  }
  return overrides
}

/**
 * What went wrong in the text, without the text: the parser quotes the offending lines, and the
 * path given may name a file that holds secrets rather than rules.
 */
function whereParsingFailed(error: unknown): string {
  const { code, linePos } = error as { code?: unknown; linePos?: Array<{ line: number; col: number }> }
  const at = linePos?.[0]
  if (typeof code !== 'string') return 'the parser failed'
  return at ? `${code} at line ${at.line}, column ${at.col}` : code
}

/** The document's shape, never its content, for the same reason. */
function shapeOf(document: unknown): string {
  if (document === null || document === undefined) return 'nothing'
  if (Array.isArray(document)) return 'a list'
  if (typeof document !== 'object') return `a ${typeof document}`
  return Object.hasOwn(document, 'limits') ? `an object whose 'limits' is not a list` : `an object without 'limits'`
}

const RULES_FILE = /\.(ya?ml|json)$/i

function readSource(source: string | URL): { text: string; origin: string } {
  if (typeof source === 'string' && source.startsWith('file:') && !source.includes('\n'))
    return readSource(new URL(source))
  if (source instanceof URL) return readRulesFile(fileURLToPath(source))
  if (typeof source !== 'string') {
    throw new TollgateConfigError(`loadRules takes YAML or JSON text or a file path, got ${describeValue(source)}`)
  }
  if (!source.includes('\n') && (existsSync(source) || RULES_FILE.test(source.trim()))) return readRulesFile(source)
  return { text: source, origin: 'rules text' }
}

function readRulesFile(path: string): { text: string; origin: string } {
  try {
    return { text: readFileSync(path, 'utf8'), origin: path }
  } catch (error) {
    throw new TollgateConfigError(`loadRules cannot read rules file ${path}: ${(error as Error).message}`)
  }
}

/**
 * Numbers here are seconds (the file format's unit); strings keep their own unit. Seconds become
 * a duration string, never a bare number, which in code would be milliseconds.
 */
function secondsToPeriod(period: unknown, where: string): Duration {
  if (typeof period === 'string') return period as Duration
  if (typeof period === 'number' && Number.isFinite(period) && period > 0) {
    // Past what a plain decimal spells (1e21, 1e-7), milliseconds as a number, refused as such.
    return /^\d+(\.\d+)?$/.test(String(period)) ? `${period}s` : period * 1000
  }
  throw new TollgateConfigError(`${where}: period must be a positive number of seconds, got ${describeValue(period)}`)
}
