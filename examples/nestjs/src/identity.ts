import type { IncomingHttpHeaders } from 'node:http'
import { type ClientView, userIdentifier } from '@tollgate/core'

// A username that is not a string (an object, a float) would make an invalid identifier.
export function usernameOf(req: { body?: unknown }): string | undefined {
  const username: unknown = (req.body as { username?: unknown } | undefined)?.username
  return typeof username === 'string' ? username : undefined
}

// The header stands in for a real session or token: anyone can send it.
export function userOrAddress(req: { headers: IncomingHttpHeaders }, client: ClientView): string {
  const id = req.headers['x-user-id']
  return typeof id === 'string' && id !== '' ? userIdentifier(id) : client.ipIdentifier
}
