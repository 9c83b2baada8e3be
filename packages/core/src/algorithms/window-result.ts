/** One window's answer to an operation, as every algorithm gives it and every store passes it on. */
export interface StoreWindowResult {
  /** Whole units left after this operation. */
  remaining: number
  /** When the window next frees a unit (now when nothing is used). */
  resetAtMs: number
  /**
   * The earliest time the request's cost fits in this window; `Infinity` if it never can. For a
   * window that shed the request: the earliest time its use after the cost is at most its
   * `lowBurst`, and at least a millisecond after now.
   */
  fitsAtMs: number
}

/** An answer to be written over (`Algorithm.settle` writes into answers it is given). */
export function emptyAnswer(): StoreWindowResult {
  return { remaining: 0, resetAtMs: 0, fitsAtMs: 0 }
}

/**
 * The answer at `at` in `into`, to be written over: the one already there, or one made and put
 * there. A store that keeps its answers from one decision to the next allocates none.
 */
export function answerAt(into: StoreWindowResult[], at: number): StoreWindowResult {
  const kept = into[at]
  if (kept !== undefined) return kept
  const made = emptyAnswer()
  into[at] = made
  return made
}
