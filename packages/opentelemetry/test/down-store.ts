import type { MemoryStore, Store, StoreRequest } from '@tollgate/core'

/** A store that fails every decision of the rule `down`, through `evaluate` as a network store would. */
export const downStore = (memory: MemoryStore): Store => ({
  evaluate: (request: StoreRequest) =>
    // A target names the rule's state, `name@<digest of its shape>`.
    request.targets[0]?.rule.startsWith('down@')
      ? Promise.reject(new Error('connect ECONNREFUSED 127.0.0.1:6379'))
      : memory.evaluate(request),
  reset: (targets) => memory.reset(targets),
  close: () => memory.close(),
})
