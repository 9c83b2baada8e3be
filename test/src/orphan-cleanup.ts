import type { ChildProcess } from 'node:child_process'
import { rmSync } from 'node:fs'

// Each child that has not been stopped yet, with the temporary directory to remove after it.
const running = new Map<ChildProcess, string>()
let hooksInstalled = false

/** Kills the child and removes its directory if the test process ends before stopping it. */
export function killOnParentExit(child: ChildProcess, dir: string): void {
  running.set(child, dir)
  if (hooksInstalled) return
  hooksInstalled = true
  process.on('exit', killRunning)
  // A signal ends Node without 'exit'. Once this listener has run (and removed itself), re-raising
  // the signal keeps Node's default of terminating, unless another listener handles it.
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
    process.once(signal, () => {
      killRunning()
      if (process.listenerCount(signal) === 0) process.kill(process.pid, signal)
    })
  }
}

/** For a child that has exited or been stopped, whose directory its owner removes. */
export function cancelKillOnParentExit(child: ChildProcess): void {
  running.delete(child)
}

// Must stay synchronous because it runs inside 'exit', hence SIGKILL without waiting and rmSync.
function killRunning(): void {
  for (const [child, dir] of running) {
    child.kill('SIGKILL')
    rmSync(dir, { recursive: true, force: true })
  }
  running.clear()
}
