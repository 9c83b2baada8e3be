import { setTimeout as delay } from 'node:timers/promises'
import { messageOf } from './error-message.js'

/** What one check saw: the awaited value, or a description of the state that is not it yet. */
export type Poll<T> = { done: true; value: T } | { done: false; state: string }

const POLL_INTERVAL_MS = 50

/**
 * Calls check until it reports done; a check that throws counts as not done yet. On timeout the
 * error names what was awaited and the last state seen, which is what a failing test needs to say.
 */
export async function pollUntil<T>(what: string, timeoutMs: number, check: () => Promise<Poll<T>>): Promise<T> {
  const deadline = Date.now() + timeoutMs
  let lastState = 'not checked'
  for (;;) {
    try {
      const result = await check()
      if (result.done) return result.value
      lastState = result.state
    } catch (error) {
      lastState = messageOf(error)
    }
    if (Date.now() >= deadline) {
      throw new Error(`Timed out after ${timeoutMs} ms waiting until ${what}; last seen: ${lastState}`)
    }
    await delay(POLL_INTERVAL_MS)
  }
}
