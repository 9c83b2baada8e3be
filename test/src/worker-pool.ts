import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process'
import { once } from 'node:events'
import { createInterface } from 'node:readline'

/** Long-lived child processes spoken to by lines, so a test can start them all on one signal. */
export class WorkerPool {
  private readonly children: ChildProcessWithoutNullStreams[]
  private readonly lines: AsyncIterator<string>[]

  constructor(script: string, args: string[], count: number) {
    this.children = Array.from({ length: count }, () =>
      spawn(process.execPath, ['--import', 'tsx', script, ...args], { stdio: 'pipe' }),
    )
    this.lines = this.children.map((child) => {
      child.stderr.on('data', (chunk) => process.stderr.write(chunk))
      return createInterface({ input: child.stdout })[Symbol.asyncIterator]()
    })
  }

  /** Sends one line to every child at once and collects each child's one-line JSON answer. */
  async broadcast<T>(line: string): Promise<T[]> {
    for (const child of this.children) child.stdin.write(`${line}\n`)
    return Promise.all(
      this.lines.map(async (lines, i) => {
        const next = await lines.next()
        if (next.done) throw new Error(`worker ${i} exited (code ${this.children[i]?.exitCode}) before answering`)
        return JSON.parse(next.value) as T
      }),
    )
  }

  async close(): Promise<void> {
    await Promise.all(
      this.children.map(async (child) => {
        if (child.exitCode !== null) return
        child.stdin.end()
        await once(child, 'exit')
      }),
    )
  }
}
