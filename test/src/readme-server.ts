import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { readFileSync } from 'node:fs'
import { createInterface } from 'node:readline'
import { onTestFinished } from 'vitest'

export interface ReadmeServerOptions {
  /** The package's directory, ending in '/'. */
  packageDir: string
  /** The package's name, which the snippet imports: pointed at the package's sources instead. */
  packageName: string
  /** The language of the README's first block that is run. @default 'js' */
  fence?: 'js' | 'ts'
  /** Turns the snippet into the module node runs (TypeScript's transpile of legacy decorators, say). */
  compile?: (snippet: string) => string
}

/**
 * Runs a package README's first snippet as a reader would: from the package directory, so that its
 * framework resolves as it would in the reader's app, with the package's import pointed at its
 * sources (tsx compiles them). Answers the origin the snippet prints as `listening on
 * http://127.0.0.1:<port>`, after any lines the framework logs first; the process is killed when
 * the test ends.
 */
export async function startReadmeServer(options: ReadmeServerOptions): Promise<string> {
  const { packageDir, packageName, fence = 'js', compile = (snippet: string) => snippet } = options
  const readme = readFileSync(`${packageDir}README.md`, 'utf8')
  const snippet = new RegExp(`\`\`\`${fence}\\n([\\s\\S]*?)\`\`\``).exec(readme)?.[1]
  if (snippet === undefined) throw new Error(`${packageDir}README.md has no \`\`\`${fence} block`)
  const source = compile(snippet).replace(`'${packageName}'`, JSON.stringify(`${packageDir}src/index.ts`))
  const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', source], {
    cwd: packageDir,
    stdio: ['ignore', 'pipe', 'inherit'],
  })
  onTestFinished(async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill()
      await once(child, 'exit')
    }
  })
  const exited = once(child, 'exit').then(([code]) => Promise.reject(new Error(`the snippet exited with ${code}`)))
  const listening = (async () => {
    for await (const line of createInterface({ input: child.stdout })) {
      const origin = /listening on (http:\/\/127\.0\.0\.1:\d+)$/.exec(line)?.[1]
      if (origin) return origin
    }
    throw new Error('the snippet printed no address')
  })()
  return Promise.race([listening, exited])
}

/**
 * Six POSTs to `/login` one after another, as each README's snippet is tried (its limit is five a
 * minute): the responses, bodies unread. `body`: sent as JSON.
 */
export async function sixLogins(origin: string, body?: unknown): Promise<Response[]> {
  const init: RequestInit =
    body === undefined
      ? { method: 'POST' }
      : { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) }
  const responses: Response[] = []
  for (let i = 0; i < 6; i++) responses.push(await fetch(`${origin}/login`, init))
  return responses
}
