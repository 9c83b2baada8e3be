import type { EventEmitter } from 'node:events'
import type { Limiter } from '@tollgate/core'

export interface RulesListener {
  /** A new set of rules applies; `epoch` is the payload's, undefined when it carries none. */
  applied(epoch: number | undefined): void
  rejected(): void
}

/**
 * Listens to the events of rules that change at run time: `rules` ({ epoch, … }) when a set of
 * rules applies, `rules-rejected` when one is refused. A limiter whose rules never change never
 * emits them. Returns the function that stops listening.
 */
export function onRulesEvents(limiter: Limiter, listener: RulesListener): () => void {
  const events = limiter as unknown as EventEmitter
  const applied = (change: { epoch?: unknown } | undefined) =>
    listener.applied(typeof change?.epoch === 'number' ? change.epoch : undefined)
  const rejected = () => listener.rejected()
  events.on('rules', applied)
  events.on('rules-rejected', rejected)
  return () => {
    events.off('rules', applied)
    events.off('rules-rejected', rejected)
  }
}
