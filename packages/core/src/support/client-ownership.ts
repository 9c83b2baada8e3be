import { describeValue, TollgateConfigError } from './errors.js'

/** What closes an ioredis `Redis` or `Cluster` client. */
interface ClosableClient {
  /** Sends QUIT once the replies of the commands already sent are in, then ends the connection. */
  quit(): Promise<unknown>
  disconnect?(): void
  /** `wait` before a lazy client's first command, `end` once it is closed. */
  readonly status?: string
}

/**
 * The `closeClient` option of the stores and `LiveRules`, checked at construction: the function
 * their `close()` calls last when it is `true` (one close of the client, however often it is
 * called), undefined when the client stays open.
 */
export function clientCloser(value: unknown, client: unknown, where: string): (() => Promise<void>) | undefined {
  if (value === undefined || value === false) return undefined
  if (value !== true) {
    throw new TollgateConfigError(`${where} option closeClient must be true or false, got ${describeValue(value)}`)
  }
  if (typeof (client as Partial<ClosableClient> | null)?.quit !== 'function') {
    throw new TollgateConfigError(
      `${where} option closeClient needs a client with quit() to close (an ioredis Redis or Cluster), got ${describeValue(client)}`,
    )
  }
  let closing: Promise<void> | undefined
  return () => {
    closing ??= closeClient(client as ClosableClient)
    return closing
  }
}

async function closeClient(client: ClosableClient): Promise<void> {
  // Ended already: closed by another owner (a store and LiveRules both told to close one client).
  if (client.status === 'end') return
  // Never connected (lazyConnect): QUIT would connect only to close.
  if (client.status === 'wait' && typeof client.disconnect === 'function') {
    client.disconnect()
    return
  }
  try {
    await client.quit()
  } catch {
    // QUIT cannot reach a server that is down; disconnect() still stops the reconnection timer.
    client.disconnect?.()
  }
}
