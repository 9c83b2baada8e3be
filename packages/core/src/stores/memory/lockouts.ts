import type { LockoutState } from '../../algorithms/lockout.js'
import { KeyBuilder } from '../../rules/keys.js'
import { OldestFirst } from '../../support/oldest-first.js'
import type { LockoutTable } from '../shared/evaluate-locally.js'
import type { StoreTarget } from '../store.js'

interface Kept {
  readonly state: LockoutState
  readonly expiresAt: number
  readonly target: Pick<StoreTarget, 'rule' | 'algorithm' | 'identifier'>
}

/**
 * A MemoryStore's blocks, by rule and identifier, as Redis keeps them beside each state key: few
 * (only rules with `block` have them, only identifiers they refused), so kept in the order of
 * their last writes, bounded like the store's keys: past `maxKeys`, the oldest kept goes first.
 * A flood of identifiers refused one after another keeps it full, each new one taking the oldest
 * one's place.
 */
export class MemoryLockouts implements LockoutTable {
  private readonly kept = new OldestFirst<string, Kept>()

  constructor(private readonly maxKeys: number) {}

  get size(): number {
    return this.kept.size
  }

  get(target: StoreTarget, now: number): LockoutState | undefined {
    // Most identifiers of a rule that blocks were never refused: no name made for them.
    if (this.kept.size === 0) return undefined
    const name = nameOf(target)
    const kept = this.kept.get(name)
    if (kept === undefined) return undefined
    if (kept.expiresAt > now) return kept.state
    this.kept.delete(name)
    return undefined
  }

  set(target: StoreTarget, state: LockoutState, expiresAt: number): void {
    const name = nameOf(target)
    if (this.kept.size >= this.maxKeys && !this.kept.has(name)) this.kept.deleteOldest()
    // Copied: a decision made in the process passes targets it reuses for the next one.
    const { rule, algorithm, identifier } = target
    this.kept.set(name, { state, expiresAt, target: { rule, algorithm, identifier } })
  }

  /** Lifts the targets' blocks and forgets their refusals: `limiter.reset`. */
  delete(targets: readonly StoreTarget[]): void {
    if (this.kept.size === 0) return
    for (const target of targets) this.kept.delete(nameOf(target))
  }

  sweep(now: number): void {
    for (const [name, kept] of this.kept) if (kept.expiresAt <= now) this.kept.delete(name)
  }

  /** Each as RedisStore names its key (`<key>:block`), with the milliseconds it has left. */
  ttls(now: number): Array<{ key: string; ttlMs: number }> {
    const keys = new KeyBuilder('')
    const ttls: Array<{ key: string; ttlMs: number }> = []
    for (const [, { target, expiresAt }] of this.kept) {
      if (expiresAt > now) {
        ttls.push({
          key: `${keys.key(target.rule, target.algorithm, target.identifier)}:block`,
          ttlMs: expiresAt - now,
        })
      }
    }
    return ttls
  }

  clear(): void {
    this.kept.clear()
  }
}

function nameOf(target: StoreTarget): string {
  return `${target.algorithm} ${target.rule}\n${target.identifier}`
}
