import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process'
import { once } from 'node:events'
import { dirname, join } from 'node:path'
import { createInterface } from 'node:readline'
import { fileURLToPath } from 'node:url'

const SOURCE_DIR = dirname(fileURLToPath(import.meta.url))
const PACKAGE_DIR = dirname(SOURCE_DIR)

/** This process's Node flags (tsx, and the built-Tollgate resolver when the bench was started with it), tsx at least. */
export function nodeFlags(): string[] {
  const flags = process.execArgv.filter((flag) => !flag.startsWith('--cpu-prof'))
  return flags.some((flag) => flag.includes('tsx')) ? flags : ['--import', 'tsx', ...flags]
}

/** A TypeScript module of this package run by tsx in a process of its own, spoken to in lines. */
export class LineChild {
  private readonly child: ChildProcessWithoutNullStreams
  private readonly lines: AsyncIterator<string>
  private stderr = ''

  /** `flags`: Node flags beside this process's own (nodeFlags). */
  constructor(module: string, args: readonly string[], flags: readonly string[] = []) {
    this.child = spawn(process.execPath, [...flags, ...nodeFlags(), join(SOURCE_DIR, module), ...args], {
      cwd: PACKAGE_DIR,
      stdio: 'pipe',
    })
    this.child.stderr.on('data', (chunk: Buffer) => {
      this.stderr = (this.stderr + chunk.toString()).slice(-4_000)
    })
    this.lines = createInterface({ input: this.child.stdout })[Symbol.asyncIterator]()
  }

  send(line: string): void {
    this.child.stdin.write(`${line}\n`)
  }

  /** The next line the child prints, parsed as JSON. */
  async receive<T>(): Promise<T> {
    const next = await this.lines.next()
    if (next.done) throw new Error(`child exited (code ${this.child.exitCode}) before answering:\n${this.stderr}`)
    return JSON.parse(next.value) as T
  }

  async request<T>(line: string): Promise<T> {
    this.send(line)
    return this.receive<T>()
  }

  /** Closes its stdin, which the children take as the end; SIGKILL if it has not exited 5 s later. */
  async close(): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return
    const exited = once(this.child, 'exit')
    this.child.stdin.end()
    const timer = setTimeout(() => this.child.kill('SIGKILL'), 5_000)
    await exited
    clearTimeout(timer)
  }
}
