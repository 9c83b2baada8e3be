import { readFileSync } from 'node:fs'
import { rename, rm, writeFile } from 'node:fs/promises'
import { isPlainObject } from '../support/option-objects.js'
import type { Overrides, StoredRule } from './overrides.js'

const FORMAT = 'tollgate-live-rules'
const VERSION = 1

/**
 * What a snapshot file holds: the overrides of one epoch, readable (and editable in a pinch) by
 * people, one rule a line. `publishId` came later: a snapshot without it is trusted for nothing
 * but its rules until Redis is read in full.
 */
interface SnapshotFile {
  format: typeof FORMAT
  version: typeof VERSION
  prefix: string
  epoch: number
  publishId?: string
  savedAtMs: number
  rules: Record<string, unknown>
}

export interface Snapshot {
  readonly epoch: number
  /** The id of the publish that made the epoch ('' for none recorded); undefined when the file does not say. */
  readonly publishId: string | undefined
  readonly rules: StoredRule[]
}

/**
 * The snapshot at `path`; undefined when there is no file (a first start). Throws, saying why,
 * for a file that cannot be read or is not a snapshot of these rules.
 */
export function readSnapshot(path: string, prefix: string): Snapshot | undefined {
  let text: string
  try {
    text = readFileSync(path, 'utf8')
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined
    throw error
  }
  const file = JSON.parse(text) as Partial<SnapshotFile>
  if (!isPlainObject(file) || file.format !== FORMAT || file.version !== VERSION || !isPlainObject(file.rules)) {
    throw new Error(`it is not a version ${VERSION} live rules snapshot`)
  }
  if (file.prefix !== prefix) {
    throw new Error(`it holds the rules of prefix ${JSON.stringify(file.prefix)}, not ${JSON.stringify(prefix)}`)
  }
  const { epoch, publishId } = file
  if (typeof epoch !== 'number' || !Number.isSafeInteger(epoch) || epoch < 0) throw new Error('its epoch is not valid')
  const rules = Object.entries(file.rules).map(([rule, options]) => ({ rule, text: JSON.stringify(options), epoch }))
  return { epoch, publishId: typeof publishId === 'string' ? publishId : undefined, rules }
}

/**
 * Writes the overrides of `epoch` (made by the publish `publishId`) to `path` atomically: into a
 * file beside it, then renamed over it, so that a process stopped mid-write leaves the last whole
 * snapshot.
 */
export async function writeSnapshot(
  path: string,
  prefix: string,
  epoch: number,
  publishId: string,
  overrides: Overrides,
): Promise<void> {
  const header: Omit<SnapshotFile, 'rules'> = {
    format: FORMAT,
    version: VERSION,
    prefix,
    epoch,
    publishId,
    savedAtMs: Date.now(),
  }
  // Each override's stored JSON as it is: a set of tens of thousands of rules is not encoded again.
  const lines: string[] = []
  for (const [rule, override] of overrides) lines.push(`    ${JSON.stringify(rule)}: ${override.text}`)
  const head = JSON.stringify(header, null, 2).slice(0, -2)
  const text = `${head},\n  "rules": {${lines.length === 0 ? '' : `\n${lines.join(',\n')}\n  `}}\n}\n`
  const temporary = `${path}.${process.pid}.tmp`
  try {
    await writeFile(temporary, text)
    await rename(temporary, path)
  } catch (error) {
    // The write's own error is the one to see, whatever becomes of the temporary file.
    await rm(temporary, { force: true }).catch(() => {})
    throw error
  }
}
