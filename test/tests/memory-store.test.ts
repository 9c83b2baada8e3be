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
    close: async () => {},
  }
})
