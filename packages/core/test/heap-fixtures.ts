import v8 from 'node:v8'
import { runInNewContext } from 'node:vm'

/**
 * The heap in use once everything unreachable is collected. It waits for the task to end first:
 * a WeakRef made in a task holds its target until then.
 */
export async function collectedHeapUsed(): Promise<number> {
  v8.setFlagsFromString('--expose-gc')
  const gc = runInNewContext('gc') as () => void
  await new Promise((resolve) => setImmediate(resolve))
  gc()
  gc()
  return process.memoryUsage().heapUsed
}
