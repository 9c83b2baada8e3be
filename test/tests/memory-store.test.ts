import { MemoryStore } from '@tollgate/core'
import { runStoreConformance } from '../src/store-conformance.js'

runStoreConformance('MemoryStore', async () => {
  let current: MemoryStore | undefined
  return {
    makeStore(clock) {
      current = new MemoryStore({ clock, sweepIntervalMs: 0 })
      return current
    },
    keys: async () => current?.ttls() ?? [],
    // The store keeps its state to itself; the suite compares it whole, before and after.
    snapshot: async () => {
      const entries = (
        current as unknown as { entries: Map<string, { state: unknown; expiresAt: number }> } | undefined
      )?.entries
      return Object.fromEntries(
        [...(entries ?? [])].map(([key, entry]) => [key, JSON.stringify([entry.state, entry.expiresAt])]),
      )
    },
    close: async () => {},
  }
})
