import { execFile } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { describe, expect, it } from 'vitest'

const run = promisify(execFile)
const core = fileURLToPath(new URL('../../packages/core/', import.meta.url))

describe('packages/core/README.md', () => {
  it('opens with a snippet that runs as written and prints what its comment says', async () => {
    const readme = readFileSync(`${core}README.md`, 'utf8')
    const snippet = /```js\n([\s\S]*?)```/.exec(readme)?.[1]
    expect(snippet).toBeDefined()
    // The built package, as a user importing '@tollgate/core' would get it (pnpm test builds first).
    const source = (snippet as string).replace("'@tollgate/core'", JSON.stringify(`${core}dist/index.js`))
    const { stdout } = await run(process.execPath, ['--input-type=module', '-e', source], { timeout: 20_000 })
    expect(stdout.trim().split('\n')).toEqual([
      '1 true []',
      '2 true []',
      '3 true []',
      '4 true []',
      '5 true []',
      "6 false [ 'ip:203.0.113.7 3000 ms', 'user:42 3000 ms' ]",
    ])
  })
})
