import type { IncomingMessage, ServerResponse } from 'node:http'

/** What the `stale` event carries: a read of Redis is under way and has not answered in time. */
export interface AdminStaleness {
  /** When the read that has not answered started (ms since the epoch, this machine's clock). */
  sinceMs: number
  /** How long it has waited so far. */
  waitedMs: number
}

export interface LiveStreamOptions {
  read: () => Promise<unknown>
  intervalMs: number
  /** Streams open at once; the next is answered 503. */
  maxStreams: number
  /** A page whose stream has more than this unsent when the next update is due is dropped. */
  maxBufferedBytes: number
  /** A read that has not answered this long makes the streams say `stale`. */
  staleAfterMs: number
}

/** What a refused page is told to wait: an EventSource gives up on a 503, and the page opens again after this. */
export const RETRY_AFTER_SECONDS = 5

/**
 * Server-Sent Events to every open page from one read per interval, whoever is watching: the
 * timer runs only while a page is open, and a read still under way is not started again. A read
 * that hangs (Redis stopped, a network that drops packets) sends no update, so the streams say
 * `stale` instead, at once when it passes `staleAfterMs` and again at each interval after, until
 * it answers.
 */
export class LiveStream {
  private readonly pages = new Set<ServerResponse>()
  private timer: NodeJS.Timeout | undefined
  private staleTimer: NodeJS.Timeout | undefined
  private reading: { startedAt: number; sinceMs: number } | undefined
  /** The last update sent, for a page that opens while a read is under way. */
  private last: string | undefined
  private closed = false

  constructor(private readonly options: LiveStreamOptions) {}

  /** Streams open now. */
  get size(): number {
    return this.pages.size
  }

  open(req: IncomingMessage, res: ServerResponse): void {
    if (this.closed) {
      res.writeHead(503, { 'Content-Type': 'text/plain; charset=utf-8' }).end('the admin view is closed\n')
      return
    }
    if (this.pages.size >= this.options.maxStreams) {
      res
        .writeHead(503, { 'Content-Type': 'text/plain; charset=utf-8', 'Retry-After': String(RETRY_AFTER_SECONDS) })
        .end(`the admin view serves at most ${this.options.maxStreams} event streams at once (maxStreams)\n`)
      return
    }
    res.writeHead(200, {
      'Content-Type': 'text/event-stream; charset=utf-8',
      'Cache-Control': 'no-cache, no-transform',
      Connection: 'keep-alive',
      // Proxies such as nginx would hold the events back in a buffer.
      'X-Accel-Buffering': 'no',
    })
    res.write('retry: 2000\n\n')
    this.pages.add(res)
    req.on('close', () => this.drop(res))
    if (this.reading === undefined) {
      // A page that opens gets what there is at once, not a second later; the others get it too.
      void this.tick()
    } else {
      if (this.last !== undefined) res.write(this.last)
      if (this.isStale()) res.write(this.staleEvent())
    }
    this.timer ??= setInterval(() => void this.tick(), this.options.intervalMs)
  }

  /** Ends every open stream; the pages' EventSource reconnects and is answered 503. */
  close(): void {
    this.closed = true
    this.stop()
    clearTimeout(this.staleTimer)
    for (const res of this.pages) res.end()
    this.pages.clear()
  }

  private drop(res: ServerResponse): void {
    if (!this.pages.delete(res)) return
    res.destroy()
    if (this.pages.size === 0) this.stop()
  }

  private stop(): void {
    clearInterval(this.timer)
    this.timer = undefined
  }

  private async tick(): Promise<void> {
    if (this.reading !== undefined) {
      if (this.isStale()) this.send(this.staleEvent())
      return
    }
    this.reading = { startedAt: performance.now(), sinceMs: Date.now() }
    this.staleTimer = setTimeout(() => this.send(this.staleEvent()), this.options.staleAfterMs)
    try {
      let data: unknown
      try {
        data = await this.options.read()
      } catch (error) {
        data = { error: error instanceof Error ? error.message : String(error) }
      }
      this.last = `data: ${JSON.stringify(data)}\n\n`
      this.send(this.last)
    } finally {
      clearTimeout(this.staleTimer)
      this.reading = undefined
    }
  }

  private isStale(): boolean {
    return this.reading !== undefined && performance.now() - this.reading.startedAt >= this.options.staleAfterMs
  }

  private staleEvent(): string {
    const { startedAt, sinceMs } = this.reading as { startedAt: number; sinceMs: number }
    const staleness: AdminStaleness = { sinceMs, waitedMs: Math.round(performance.now() - startedAt) }
    return `event: stale\ndata: ${JSON.stringify(staleness)}\n\n`
  }

  /**
   * Writes to every page that has taken what it was sent before: a page that stopped reading
   * would otherwise hold every update in this process's memory, so once more than
   * `maxBufferedBytes` wait for it, it is dropped (its EventSource opens again once it reads).
   */
  private send(event: string): void {
    for (const res of this.pages) {
      if (res.writableLength > this.options.maxBufferedBytes) this.drop(res)
      else res.write(event)
    }
  }
}
