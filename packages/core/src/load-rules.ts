import { existsSync, readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { parse } from 'yaml'
import { describeValue, TollgateConfigError } from './errors.js'
import { isPlainObject, type RuleOptions, type RulesOptions, rejectUnknownKeys } from './rules.js'

const ITEM_KEYS = new Set(['name', 'config', 'algorithm', 'parent', 'onStoreError'])
const WINDOW_KEYS = new Set(['limit', 'period'])

/**
 * Reads rules from YAML or JSON text, or from a file path (or `file:` URL), in this form:
 *
 * ```yaml
 * limits:
 *   - name: auth.createToken
 *     algorithm: sliding-log      # optional
 *     parent: auth                # optional
 *     onStoreError: deny          # optional: allow, deny or local
 *     config:
 *       - { limit: 20, period: 60 }   # period in seconds, or a duration such as '500ms'
 *       - { limit: 5, period: 3 }
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
    if (!isPlainObject(item)) throw new TollgateConfigError(`${where} must be an object, got ${describeValue(item)}`)
    rejectUnknownKeys(item, ITEM_KEYS, where)
    const { name, config, algorithm, parent, onStoreError } = item
    if (typeof name !== 'string' || name.length === 0) {
      throw new TollgateConfigError(`${where}: name must be a non-empty string, got ${describeValue(name)}`)
    }
    if (Object.hasOwn(rules, name)) throw new TollgateConfigError(`${where}: rule '${name}' is defined twice`)
    if (!Array.isArray(config)) {
      throw new TollgateConfigError(
        `${where} ('${name}'): config must be a list of { limit, period }, got ${describeValue(config)}`,
      )
    }
    const windows = config.map((window: unknown, w: number) => {
      const at = `${where} ('${name}'), config[${w}]`
      if (!isPlainObject(window))
        throw new TollgateConfigError(`${at} must be { limit, period }, got ${describeValue(window)}`)
      rejectUnknownKeys(window, WINDOW_KEYS, at)
      return { limit: window.limit as number, period: secondsToPeriod(window.period, at) }
    })
    rules[name] = {
      windows,
      ...(algorithm === undefined ? {} : { algorithm: algorithm as RuleOptions['algorithm'] }),
      ...(parent === undefined ? {} : { parent: parent as string }),
      ...(onStoreError === undefined ? {} : { onStoreError: onStoreError as RuleOptions['onStoreError'] }),
    }
  })
  return rules
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

/** Numbers here are seconds (the file format's unit); strings keep their own unit. */
function secondsToPeriod(period: unknown, where: string): number | string {
  if (typeof period === 'string') return period
  if (typeof period === 'number' && Number.isFinite(period) && period > 0) return Math.round(period * 1000 * 1e6) / 1e6
  throw new TollgateConfigError(`${where}: period must be a positive number of seconds, got ${describeValue(period)}`)
}
