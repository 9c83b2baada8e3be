import { get, type IncomingMessage } from 'node:http'
import type { AdminSnapshot, AdminStaleness } from '../src/index.js'

/** The Server-Sent Events of one connection, parsed, and a way to await the one a test expects. */
export interface EventStream {
  /** The updates (unnamed events), in order. */
  readonly events: AdminSnapshot[]
  /** The `stale` events, in order. */
  readonly stale: AdminStaleness[]
  /** The first update (received already or to come) that `matches`; rejects after `timeoutMs` with the last one seen. */
  until(what: string, matches: (event: AdminSnapshot) => boolean, timeoutMs?: number): Promise<AdminSnapshot>
  /** The same for `stale` events. */
  untilStale(what: string, matches: (event: AdminStaleness) => boolean, timeoutMs?: number): Promise<AdminStaleness>
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
      const stale: AdminStaleness[] = []
      const waiters = new Set<() => void>()
      let buffer = ''
      response.setEncoding('utf8')
      response.on('data', (chunk: string) => {
        buffer += chunk
        for (let end = buffer.indexOf('\n\n'); end >= 0; end = buffer.indexOf('\n\n')) {
          const lines = buffer.slice(0, end).split('\n')
          buffer = buffer.slice(end + 2)
          const field = (name: string) =>
            lines
              .filter((line) => line.startsWith(`${name}: `))
              .map((line) => line.slice(`${name}: `.length))
              .join('\n')
          const data = field('data')
          if (data === '') continue
          if (field('event') === 'stale') stale.push(JSON.parse(data) as AdminStaleness)
          else events.push(JSON.parse(data) as AdminSnapshot)
        }
        for (const waiter of waiters) waiter()
      })
      const until =
        <T>(list: T[]) =>
        (what: string, matches: (event: T) => boolean, timeoutMs = 5_000): Promise<T> =>
          new Promise((found, failed) => {
            let checked = 0
            const check = () => {
              for (; checked < list.length; checked++) {
                const event = list[checked] as T
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
                  `no event within ${timeoutMs} ms where ${what}; last of ${list.length}: ${JSON.stringify(list.at(-1))}`,
                ),
              )
            }, timeoutMs)
            waiters.add(check)
            check()
          })
      resolve({
        events,
        stale,
        until: until(events),
        untilStale: until(stale),
        close: () => request.destroy(),
      })
    })
    request.on('error', reject)
  })
}
