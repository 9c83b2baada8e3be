import { createServer } from 'node:net'

/**
 * A port the OS reports free on 127.0.0.1 at this moment. Another process can still take it before
 * the caller binds it, so callers that spawn a server must be ready to retry with a fresh port.
 */
export function findFreePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer()
    server.unref()
    server.once('error', reject)
    server.listen({ host: '127.0.0.1', port: 0, exclusive: true }, () => {
      const address = server.address()
      const port = typeof address === 'object' && address !== null ? address.port : undefined
      server.close((error) => {
        if (error) reject(error)
        else if (port === undefined) reject(new Error('findFreePort: the OS did not report a TCP port'))
        else resolve(port)
      })
    })
  })
}
