import { MemoryStore } from '@tollgate/core'
import { runStoreConformance } from '../src/store-conformance.js'

interface Home {
  readonly rule: string
  readonly algorithm: string
  readonly other: Home | undefined
  readonly entries: Map<string, { state: unknown; expiresAt: number; held: boolean }>
  readonly digests: Map<string, { state: unknown; expiresAt: number; held: boolean }>
}

runStoreConformance('MemoryStore', async () => {
  let current: MemoryStore | undefined
  return {
    makeStore(clock) {
      current = new MemoryStore({ clock, sweepIntervalMs: 0 })
      return current
    },
    keys: async () => current?.ttls() ?? [],
    // The store keeps its state to itself (homes by rule, each with its entries by identifier and
    // by digest); the suite compares it whole, before and after.
    snapshot: async () => {
      const homes = (current as unknown as { homes: Map<string, Home> } | undefined)?.homes
      const snapshot: Record<string, string> = {}
      for (const first of homes?.values() ?? []) {
        for (let home: Home | undefined = first; home !== undefined; home = home.other) {
          for (const [map, tag] of [
            [home.entries, ''],
            [home.digests, '#'],
          ] as const) {
            for (const [key, entry] of map) {
              if (entry.held)
                snapshot[`${home.rule}:${home.algorithm}:${tag}${key}`] = JSON.stringify([entry.state, entry.expiresAt])
            }
          }
        }
      }
      return snapshot
    },
    close: async () => {},
  }
})
