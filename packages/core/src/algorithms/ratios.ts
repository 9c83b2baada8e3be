/**
 * Exact `ceil(a × o / p)` and its inverse for counts up to 2^53 − 1 and periods up to 2^35 ms
 * (366 days is below it), with doubles only. `a × o` passes 2^53 for large quotas (2^53 − 1 per
 * 366 days reaches 2^88), where a double would round; there the product is split so that every
 * partial product stays below 2^53. `%` is exact on doubles (IEEE remainder of integers), and a
 * quotient of two integers below 2^53 floors exactly: its rounding error is smaller than its
 * distance to the next integer. `lua/lib/numbers.lua` repeats these steps with math.fmod.
 */

const MAX_EXACT = Number.MAX_SAFE_INTEGER
/** 2^17: splits a period below 2^35 so that a remainder below it times either half stays below 2^53. */
const HALF = 131_072

/** `ceil(a × o / p)` for integers 0 ≤ a < 2^53, 0 ≤ o ≤ p ≤ 2^35. */
export function ceilRatio(a: number, o: number, p: number): number {
  const product = a * o
  if (product <= MAX_EXACT) return Math.ceil(product / p)
  // a × o / p = qa × o + ra × o / p, with ra × o = (qx × p + rx) × 2^17 + ra × low.
  const ra = a % p
  const qa = (a - ra) / p
  const low = o % HALF
  const x = ra * ((o - low) / HALF)
  const rx = x % p
  const y = rx * HALF + ra * low
  const ry = y % p
  return qa * o + ((x - rx) / p) * HALF + (y - ry) / p + (ry > 0 ? 1 : 0)
}

/** The largest o in [0, p] with `a × o ≤ r × p`, i.e. `floor(r × p / a)`, for 0 ≤ r < a < 2^53, p ≤ 2^35. */
export function largestWithin(a: number, r: number, p: number): number {
  const product = r * p
  if (product <= MAX_EXACT) return Math.floor(product / a)
  // The estimate is within one of the answer (its relative error is 2^-52 of a value below
  // 2^35); the exact comparisons settle it.
  let o = Math.min(p, Math.floor((r / a) * p))
  while (o < p && ceilRatio(a, o + 1, p) <= r) o++
  while (o > 0 && ceilRatio(a, o, p) > r) o--
  return o
}
