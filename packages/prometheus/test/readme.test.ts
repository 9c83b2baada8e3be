import { execFile } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { expect, it } from 'vitest'

const run = promisify(execFile)
const packageDir = fileURLToPath(new URL('..', import.meta.url))

it('README opens with a snippet that runs as written and prints what its comment says', async () => {
  const snippet = /```js\n([\s\S]*?)```/.exec(readFileSync(`${packageDir}README.md`, 'utf8'))?.[1]
  expect(snippet).toBeDefined()
  const source = (snippet as string).replace("'@tollgate/prometheus'", JSON.stringify(`${packageDir}src/index.ts`))
  // From the package directory, so that '@tollgate/core' and 'prom-client' resolve as in the reader's app.
  const { stdout } = await run(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', source], {
    cwd: packageDir,
    timeout: 30_000,
  })
  const promised = [...(snippet as string).matchAll(/^\/\/ (tollgate_.*)$/gm)].map((match) => match[1])
  expect(promised).toHaveLength(5)
  expect(stdout.trim().split('\n')).toEqual(promised)
})
