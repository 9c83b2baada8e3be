import type { Attributes, BatchObservableResult, Observable } from '@opentelemetry/api'

interface Point {
  readonly attributes: Attributes
  value: number
}

/**
 * The data points of one collection, every limiter's values combined per instrument and attribute
 * set before any is observed: the SDK keeps one value per attribute set from a collection, the
 * last observed, so two limiters observing the same set would hide all but one of them.
 */
export class PointTotals {
  private readonly points = new Map<Observable, Map<string, Point>>()

  /** Adds `value` to the point's total: counts, and figures of which a sum means something. */
  add(instrument: Observable, attributes: Attributes, value: number): void {
    const point = this.pointOf(instrument, attributes)
    point.value += value
  }

  /** Keeps the highest value seen for the point: states and ages, which no sum describes. */
  raise(instrument: Observable, attributes: Attributes, value: number): void {
    const point = this.pointOf(instrument, attributes, value)
    if (value > point.value) point.value = value
  }

  observeInto(result: BatchObservableResult): void {
    for (const [instrument, points] of this.points) {
      for (const { attributes, value } of points.values()) result.observe(instrument, value, attributes)
    }
  }

  private pointOf(instrument: Observable, attributes: Attributes, initial = 0): Point {
    let points = this.points.get(instrument)
    if (points === undefined) {
      points = new Map()
      this.points.set(instrument, points)
    }
    // Every caller builds an instrument's attributes in the same key order, so the JSON names the set.
    const key = JSON.stringify(attributes)
    let point = points.get(key)
    if (point === undefined) {
      point = { attributes, value: initial }
      points.set(key, point)
    }
    return point
  }
}
