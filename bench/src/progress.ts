import cliProgress from 'cli-progress'

export interface Phase {
  /** One unit of the phase's work is done; `detail` says what is running next. */
  tick(detail?: string): void
  /** Says what is running without counting work done. */
  note(detail: string): void
  done(): void
}

/**
 * Two bars on a terminal: the whole run, and the measure under way. Without a terminal (CI, a
 * log file) one line per measure instead, so logs stay readable.
 */
export class Progress {
  private readonly bars: cliProgress.MultiBar | undefined
  private readonly overall: cliProgress.SingleBar | undefined
  private readonly startedAt = performance.now()

  constructor(totalUnits: number, stream: NodeJS.WriteStream = process.stderr) {
    if (!stream.isTTY) return
    this.bars = new cliProgress.MultiBar(
      {
        stream,
        hideCursor: true,
        clearOnComplete: false,
        format: ' {bar} {percentage}% | {name} | {detail}',
        barsize: 30,
        etaBuffer: 50,
      },
      cliProgress.Presets.shades_classic,
    )
    this.overall = this.bars.create(
      totalUnits,
      0,
      { name: 'all measures'.padEnd(18) },
      { format: ' {bar} {percentage}% | {name} | {duration_formatted} so far, about {eta_formatted} to go' },
    )
  }

  phase(name: string, units: number): Phase {
    const started = performance.now()
    if (!this.bars) {
      process.stderr.write(`${this.elapsed()} ${name}: ${units} steps\n`)
      return {
        tick: () => {},
        note: () => {},
        done: () => process.stderr.write(`${this.elapsed()} ${name}: done in ${seconds(started)}\n`),
      }
    }
    const bars = this.bars
    const overall = this.overall
    const bar = bars.create(units, 0, { name: name.padEnd(18), detail: '' })
    return {
      tick(detail = '') {
        bar.increment(1, { detail })
        overall?.increment(1)
      },
      note(detail) {
        bar.update({ detail })
      },
      done() {
        bar.update(units, { detail: `done in ${seconds(started)}` })
        bar.stop()
      },
    }
  }

  /** Prints above the bars, or as a plain line. */
  log(line: string): void {
    if (this.bars) this.bars.log(`${line}\n`)
    else process.stderr.write(`${line}\n`)
  }

  stop(): void {
    this.bars?.stop()
  }

  private elapsed(): string {
    return `[${seconds(this.startedAt)}]`
  }
}

function seconds(since: number): string {
  return `${((performance.now() - since) / 1000).toFixed(1)} s`
}
