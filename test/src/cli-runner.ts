import { spawn } from 'node:child_process'
import { randomUUID } from 'node:crypto'
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'

/** The built `tollgate` command, as `npm install @tollgate/cli` installs it. */
export const CLI_BIN = fileURLToPath(new URL('../../packages/cli/dist/bin.js', import.meta.url))

export interface CliRun {
  /** The exit code; null if a signal ended it. */
  code: number | null
  stdout: string
  stderr: string
  durationMs: number
}

export interface CliRunOptions {
  /** Added to an environment that has neither REDIS_URL nor any colour setting of the caller's. */
  env?: Record<string, string>
  /** Written to stdin, which is a pipe: never a terminal. */
  input?: string
}

/** Runs `tollgate …args` in a child process and resolves once it exits, whatever its code. */
export function runCli(args: readonly string[], options: CliRunOptions = {}): Promise<CliRun> {
  return run(process.execPath, [CLI_BIN, ...args], options)
}

/**
 * Runs `tollgate …args` on a pseudo-terminal, through util-linux `script`, which forwards `input`
 * as typed and exits with the command's code. What the terminal shows, prompt and echo
 * included, comes back as stdout.
 */
export function runCliOnTerminal(args: readonly string[], options: CliRunOptions = {}): Promise<CliRun> {
  const command = [process.execPath, CLI_BIN, ...args].map((arg) => `'${arg.replaceAll("'", "'\\''")}'`).join(' ')
  return run('script', ['--quiet', '--return', '--command', command, '/dev/null'], options)
}

function run(file: string, args: readonly string[], options: CliRunOptions): Promise<CliRun> {
  if (!existsSync(CLI_BIN)) throw new Error(`${CLI_BIN} is missing: run \`pnpm build\` first (\`pnpm test\` does)`)
  const { REDIS_URL: _url, NO_COLOR: _no, FORCE_COLOR: _force, ...env } = process.env
  const startedAt = performance.now()
  return new Promise((resolve, reject) => {
    const child = spawn(file, args, {
      env: { ...env, ...options.env },
      stdio: ['pipe', 'pipe', 'pipe'],
    })
    let stdout = ''
    let stderr = ''
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      stdout += chunk
    })
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
      stderr += chunk
    })
    child.on('error', reject)
    child.on('close', (code) => resolve({ code, stdout, stderr, durationMs: performance.now() - startedAt }))
    child.stdin.end(options.input ?? '')
  })
}

/** A key prefix of its own per test: test files run in parallel on one server. */
export function cliPrefix(name: string): string {
  return `cli:${name}:${process.pid}:${randomUUID().slice(0, 8)}:`
}

/** A temporary directory for rules files, and a function that removes it. */
export function rulesDirectory(): { write(name: string, text: string): string; remove(): void } {
  const dir = mkdtempSync(join(tmpdir(), 'tollgate-cli-'))
  return {
    write(name, text) {
      const path = join(dir, name)
      writeFileSync(path, text)
      return path
    },
    remove: () => rmSync(dir, { recursive: true, force: true }),
  }
}
