import { get, type IncomingMessage } from 'node:http'
import type { AdminSnapshot } from '../src/index.js'

/** The Server-Sent Events of one connection, parsed, and a way to await the one a test expects. */
export interface EventStream {
  readonly events: AdminSnapshot[]
  /** The first event (received already or to come) that `matches`; rejects after `timeoutMs` with the last event seen. */
  until(what: string, matches: (event: AdminSnapshot) => boolean, timeoutMs?: number): Promise<AdminSnapshot>
  close(): void
}

export function openEventStream(url: string): Promise<EventStream> {
  return new Promise((resolve, reject) => {
    const request = get(url, { headers: { Accept: 'text/event-stream' } }, (response: IncomingMessage) => {
      if (response.statusCode !== 200) {
        reject(new Error(`${url} answered ${response.statusCode}`))
        response.resume()
        return
      }
      const events: AdminSnapshot[] = []
      const waiters = new Set<() => void>()
      let buffer = ''
      response.setEncoding('utf8')
      response.on('data', (chunk: string) => {
        buffer += chunk
        for (let end = buffer.indexOf('\n\n'); end >= 0; end = buffer.indexOf('\n\n')) {
          const data = buffer
            .slice(0, end)
            .split('\n')
            .filter((line) => line.startsWith('data: '))
            .map((line) => line.slice('data: '.length))
            .join('\n')
          buffer = buffer.slice(end + 2)
          if (data !== '') events.push(JSON.parse(data) as AdminSnapshot)
        }
        for (const waiter of waiters) waiter()
      })
      resolve({
        events,
        until(what, matches, timeoutMs = 5_000) {
          return new Promise((found, failed) => {
            let checked = 0
            const check = () => {
              for (; checked < events.length; checked++) {
                const event = events[checked] as AdminSnapshot
                if (matches(event)) {
                  clearTimeout(timer)
                  waiters.delete(check)
                  found(event)
                  return
                }
              }
            }
            const timer = setTimeout(() => {
              waiters.delete(check)
              failed(
                new Error(
                  `no event within ${timeoutMs} ms where ${what}; last of ${events.length}: ${JSON.stringify(events.at(-1))}`,
                ),
              )
            }, timeoutMs)
            waiters.add(check)
            check()
          })
        },
        close: () => request.destroy(),
      })
    })
    request.on('error', reject)
  })
}
