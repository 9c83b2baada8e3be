import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'
import { runCli } from '../src/cli-runner.js'

const repoRoot = fileURLToPath(new URL('../..', import.meta.url))

/**
 * A repository path (`src/…`, `docs/….md`) not inside a full URL: on the registry, or in a terminal
 * far from the repository, it leads nowhere. Markdown links that are relative count too.
 */
function repositoryPathsIn(text: string): string[] {
  // A link to a full URL may name the file it leads to.
  const withoutUrls = text.replace(/\[[^\]]*\]\(https?:\/\/[^)]*\)/g, '').replace(/https?:\/\/\S+/g, '')
  return [
    ...text.matchAll(/\]\((?!https?:\/\/|#)[^)\s]+\)/g),
    ...withoutUrls.matchAll(/`src\/[^`]*`/g),
    ...withoutUrls.matchAll(/\bdocs\/[\w-]+\.md/g),
  ].map((match) => match[0])
}

// Regression: the CLI's README, as shipped, pointed at `src/command.ts` and `docs/admin.md`, and
// `tollgate rules --help` at a relative docs/live-rules.md.
describe('what a user reads away from the repository', () => {
  const packages = readdirSync(join(repoRoot, 'packages'))

  it.each(packages)("packages/%s/README.md names the repository's files by full URL only", (name) => {
    const readme = readFileSync(join(repoRoot, 'packages', name, 'README.md'), 'utf8')
    expect(repositoryPathsIn(readme)).toEqual([])
  })

  // Regression: six packages shipped no CHANGELOG.md, and the others the 0.1.0 stub under 30 changes.
  it.each(packages)('packages/%s ships a CHANGELOG.md whose newest section is its version', (name) => {
    const { version, private: unpublished } = JSON.parse(
      readFileSync(join(repoRoot, 'packages', name, 'package.json'), 'utf8'),
    ) as { version: string; private?: boolean }
    if (unpublished) return
    const changelog = readFileSync(join(repoRoot, 'packages', name, 'CHANGELOG.md'), 'utf8')
    expect(changelog.match(/^## (\S+)$/m)?.[1]).toBe(version)
  })

  it.each([[['--help']], [['rules', '--help']]])(
    "tollgate %s names the repository's files by full URL only",
    async (args) => {
      const run = await runCli(args)
      expect(run.code).toBe(0)
      expect(run.stdout.length).toBeGreaterThan(0)
      expect(repositoryPathsIn(run.stdout)).toEqual([])
    },
  )
})
