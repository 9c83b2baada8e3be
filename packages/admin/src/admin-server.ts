import { createServer, type IncomingMessage } from 'node:http'
import type { AddressInfo } from 'node:net'
import { handlerOf } from './admin-handler.js'
import { type AdminServerOptions, adminConfigOf, serverAddressOf } from './options.js'

export interface AdminServer {
  /** Where the page is, e.g. `http://127.0.0.1:9464/`. */
  readonly url: string
  readonly port: number
  readonly host: string
  /** Stops listening, ends the open pages' streams and stops reading Redis; the client stays open. */
  close(): Promise<void>
}

const LOOPBACK_HOSTS = new Set(['127.0.0.1', '::1', '[::1]', 'localhost'])

/**
 * Serves the admin view on a port of its own, on 127.0.0.1 unless `host` says otherwise.
 * @example
 * const server = await startAdminServer({ client: redis, port: 8099 })
 * console.log(`admin view on ${server.url}`)
 */
export async function startAdminServer(options: AdminServerOptions): Promise<AdminServer> {
  const config = adminConfigOf(options, 'startAdminServer')
  const { port, host } = serverAddressOf(options)
  const handler = handlerOf(config)
  const loopback = LOOPBACK_HOSTS.has(host) || host.startsWith('127.')
  const server = createServer((req, res) => {
    // A page of another site whose name was made to resolve to 127.0.0.1 (DNS rebinding) would
    // be same-origin with this server: on loopback, answer only requests addressed to loopback.
    if (loopback && !addressedToLoopback(req)) {
      res
        .writeHead(403, { 'Content-Type': 'text/plain; charset=utf-8' })
        .end('the admin view answers only requests addressed to localhost, 127.0.0.1 or [::1]\n')
      return
    }
    handler(req, res)
  })
  try {
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject)
      server.listen(port, host, () => {
        server.off('error', reject)
        resolve()
      })
    })
  } catch (error) {
    await handler.close()
    throw error
  }
  const address = server.address() as AddressInfo
  const shownHost = address.family === 'IPv6' ? `[${address.address}]` : address.address
  return {
    url: `http://${shownHost}:${address.port}/`,
    port: address.port,
    host: address.address,
    async close() {
      await handler.close()
      server.closeAllConnections()
      await new Promise<void>((resolve) => server.close(() => resolve()))
    },
  }
}

function addressedToLoopback(req: IncomingMessage): boolean {
  const host = req.headers.host
  if (host === undefined) return true
  const name = host.startsWith('[') ? host.slice(0, host.indexOf(']') + 1) : host.split(':')[0]
  return name !== undefined && (LOOPBACK_HOSTS.has(name.toLowerCase()) || /^127\.\d+\.\d+\.\d+$/.test(name))
}
