// One process of the hybrid-sync measure: a HybridStore deciding on its own keys, told by JSON
// lines on stdin when to decide once on each of them and when to sync, and answering what it did.
import { createInterface } from 'node:readline'
import { createLimiter, HybridStore, type Limiter } from '@tollgate/core'
import { Cluster, Redis } from 'ioredis'

export interface SyncWorkerSetup {
  /** One URL for a standalone Redis; a Cluster's nodes' otherwise. */
  urls: string[]
  cluster: boolean
  /** Identifiers `user:<first>` … `user:<first + keys − 1>`, one key each. */
  first: number
  keys: number
  limit: number
  /** The rule's algorithm; a fixed window when not given. */
  algorithm?: 'fixed-window' | 'sliding-window' | 'token-bucket'
}

export interface SyncWorkerSync {
  seconds: number
  keys: number
  overAdmitted: number
  /** This process's CPU (user and system) over the sync, µs. */
  cpuUs: number
  error?: string
}

const identifierOf = (n: number): string => `user:${String(n).padStart(7, '0')}`

let limiter: Limiter | undefined
let store: HybridStore | undefined
let client: Redis | Cluster | undefined
let setup: SyncWorkerSetup | undefined
const answer = (value: unknown): void => {
  process.stdout.write(`${JSON.stringify(value)}\n`)
}

for await (const line of createInterface({ input: process.stdin })) {
  const command = JSON.parse(line) as { op: 'setup'; setup: SyncWorkerSetup } | { op: 'consume' | 'sync' | 'close' }
  if (command.op === 'setup') {
    setup = command.setup
    client = setup.cluster
      ? new Cluster(setup.urls.map((url) => ({ host: '127.0.0.1', port: Number(new URL(url).port) })))
      : new Redis(setup.urls[0] as string)
    // Connected before its keys are decided on, as a server's store has long been by its first
    // sync: on a Cluster, the client then knows which master serves which slot.
    await client.ping()
    // The measure syncs when it says: no timer. A sync of a million keys takes seconds, in calls
    // that keep answering, which is not a failure.
    store = new HybridStore({ client, autoSync: false, onWarning: () => {} })
    limiter = createLimiter({
      store,
      rules: { api: { algorithm: setup.algorithm ?? 'fixed-window', windows: [{ limit: setup.limit, period: '1h' }] } },
      onWarning: () => {},
    })
    answer({ ready: true })
  } else if (command.op === 'consume') {
    const { first, keys } = setup as SyncWorkerSetup
    let admitted = 0
    const started = performance.now()
    for (let n = first; n < first + keys; n++) {
      const decision = await (limiter as Limiter).consume('api', identifierOf(n))
      if (decision.error) throw decision.error
      if (decision.allowed) admitted++
    }
    answer({ admitted, seconds: (performance.now() - started) / 1000 })
  } else if (command.op === 'sync') {
    const cpu = process.cpuUsage()
    const started = performance.now()
    const report = await (store as HybridStore).syncNow()
    const seconds = (performance.now() - started) / 1000
    const used = process.cpuUsage(cpu)
    const result: SyncWorkerSync = {
      seconds,
      keys: report.keys,
      overAdmitted: report.overAdmitted,
      cpuUs: used.user + used.system,
    }
    if (report.error) result.error = report.error.message
    answer(result)
  } else {
    await limiter?.close()
    client?.disconnect()
    answer({ closed: true })
    break
  }
}
