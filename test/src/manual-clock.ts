/** A clock that moves only when a test moves it. */
export class ManualClock {
  constructor(public nowMs = 1_700_000_000_000) {}

  readonly now = (): number => this.nowMs

  advance(ms: number): void {
    this.nowMs += ms
  }

  set(ms: number): void {
    this.nowMs = ms
  }
}
