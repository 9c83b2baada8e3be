import type { IncomingMessage, ServerResponse } from 'node:http'

/**
 * Server-Sent Events to every open page from one read per interval, whoever is watching: the
 * timer runs only while a page is open, and a read still under way is not started again.
 */
export class LiveStream {
  private readonly pages = new Set<ServerResponse>()
  private timer: NodeJS.Timeout | undefined
  private reading = false
  private closed = false

  constructor(
    private readonly read: () => Promise<unknown>,
    private readonly intervalMs: number,
  ) {}

  open(req: IncomingMessage, res: ServerResponse): void {
    if (this.closed) {
      res.writeHead(503, { 'Content-Type': 'text/plain; charset=utf-8' }).end('the admin view is closed\n')
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
    req.on('close', () => {
      this.pages.delete(res)
      if (this.pages.size === 0) this.stop()
    })
    // A page that opens gets what there is at once, not a second later; the others get it too.
    void this.tick()
    this.timer ??= setInterval(() => void this.tick(), this.intervalMs)
  }

  /** Ends every open stream; the pages' EventSource reconnects and is answered 503. */
  close(): void {
    this.closed = true
    this.stop()
    for (const res of this.pages) res.end()
    this.pages.clear()
  }

  private stop(): void {
    if (this.timer) clearInterval(this.timer)
    this.timer = undefined
  }

  private async tick(): Promise<void> {
    if (this.reading) return
    this.reading = true
    try {
      let data: unknown
      try {
        data = await this.read()
      } catch (error) {
        data = { error: error instanceof Error ? error.message : String(error) }
      }
      const event = `data: ${JSON.stringify(data)}\n\n`
      for (const res of this.pages) res.write(event)
    } finally {
      this.reading = false
    }
  }
}
