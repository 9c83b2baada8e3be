import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { join, relative } from 'node:path'

/**
 * A fenced ```ts block of a Markdown file, with what the comment right before it says of it:
 * - `<!-- not-checked: reason -->`: a fragment the checker skips (a value shown, a shape with
 *   `...` in it), with the reason it cannot compile;
 * - `<!-- checked-with: declarations -->`: TypeScript put before the block when it is checked,
 *   for the names the text around it defined (`declare const redis: Redis`), so that a block
 *   that continues an earlier one is checked all the same.
 */
export interface DocSnippet {
  /** Relative to the repository's root. @example 'docs/hybrid.md' */
  file: string
  /** The line of the opening fence, from 1. */
  line: number
  code: string
  /** What `checked-with` declares; '' without it. */
  given: string
  /** The reason of `not-checked`, when the block is skipped. */
  notChecked?: string
}

const OPENING = /^(\s*)```(ts|typescript)\s*$/
const MARKER = /^<!--\s*(not-checked|checked-with):([\s\S]*?)-->$/

/** README.md, docs/*.md and every package's README.md, those added later included. */
export function documentationFiles(repoRoot: string): string[] {
  const docs = readdirSync(join(repoRoot, 'docs'))
    .filter((name) => name.endsWith('.md'))
    .map((name) => join(repoRoot, 'docs', name))
  const readmes = readdirSync(join(repoRoot, 'packages'))
    .map((name) => join(repoRoot, 'packages', name, 'README.md'))
    .filter((path) => existsSync(path))
  return [join(repoRoot, 'README.md'), ...docs.sort(), ...readmes.sort()]
}

export function docSnippets(repoRoot: string, path: string): DocSnippet[] {
  const file = relative(repoRoot, path)
  const lines = readFileSync(path, 'utf8').split('\n')
  const snippets: DocSnippet[] = []
  for (let i = 0; i < lines.length; i++) {
    const opening = OPENING.exec(lines[i] as string)
    if (!opening) continue
    const indent = (opening[1] as string).length
    const body: string[] = []
    let end = i + 1
    while (end < lines.length && (lines[end] as string).trim() !== '```')
      body.push((lines[end++] as string).slice(indent))
    if (end === lines.length) throw new Error(`${file}:${i + 1}: a \`\`\`ts block that never closes`)
    const snippet: DocSnippet = { file, line: i + 1, code: body.join('\n'), given: '' }
    const marker = markerBefore(lines, i)
    if (marker?.kind === 'not-checked') snippet.notChecked = marker.text
    if (marker?.kind === 'checked-with') snippet.given = marker.text
    if (marker !== undefined && marker.text === '') {
      throw new Error(`${file}:${i + 1}: <!-- ${marker.kind}: --> says nothing; give the reason or the declarations`)
    }
    snippets.push(snippet)
    i = end
  }
  return snippets
}

/** The marker comment that ends on the last non-blank line before the fence at `fence`, if any. */
function markerBefore(
  lines: readonly string[],
  fence: number,
): { kind: 'not-checked' | 'checked-with'; text: string } | undefined {
  let last = fence - 1
  while (last >= 0 && (lines[last] as string).trim() === '') last--
  if (last < 0 || !(lines[last] as string).trim().endsWith('-->')) return undefined
  let first = last
  while (first > 0 && !(lines[first] as string).includes('<!--')) first--
  const comment = lines
    .slice(first, last + 1)
    .join('\n')
    .trim()
  const match = MARKER.exec(comment)
  if (!match) return undefined
  return { kind: match[1] as 'not-checked' | 'checked-with', text: (match[2] as string).trim() }
}
