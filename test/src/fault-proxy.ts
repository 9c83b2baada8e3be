import { once } from 'node:events'
import { connect, createServer, type Server, type Socket } from 'node:net'

/**
 * What the proxy does to the traffic between a client and Redis:
 * - `pass`: forwards both ways.
 * - `delay`: holds each chunk for `delayMs` before forwarding it, both ways.
 * - `drop-after-delivery`: forwards what the client sends, so that Redis runs it, then drops the
 *   next reply and closes the client's connection: a reply lost after Redis ran the command, as a
 *   proxy or a network blip loses it. The proxy then goes on as `then` says; once the client
 *   reconnects it may, as ioredis does by default, send the command again.
 * - `reset`: destroys every connection at once, and each new one as it comes.
 */
export type FaultMode =
  | { kind: 'pass' }
  | { kind: 'delay'; delayMs: number }
  | { kind: 'drop-after-delivery'; then: FaultMode }
  | { kind: 'reset' }

/** A TCP proxy on 127.0.0.1 in front of a real Redis, for tests of what a lost reply does. */
export class FaultProxy {
  private mode: FaultMode = { kind: 'pass' }
  private readonly pairs = new Set<{ client: Socket; server: Socket }>()
  /** Replies dropped so far by `drop-after-delivery`. */
  droppedReplies = 0

  private constructor(
    private readonly server: Server,
    readonly port: number,
  ) {}

  static async start(target: { host: string; port: number }): Promise<FaultProxy> {
    const server = createServer()
    const proxy = await new Promise<FaultProxy>((resolve, reject) => {
      server.once('error', reject)
      server.listen({ host: '127.0.0.1', port: 0 }, () => {
        const address = server.address()
        if (typeof address !== 'object' || address === null) {
          reject(new Error('the proxy has no TCP port'))
          return
        }
        resolve(new FaultProxy(server, address.port))
      })
    })
    server.on('connection', (client) => proxy.accept(client, target))
    return proxy
  }

  get url(): string {
    return `redis://127.0.0.1:${this.port}`
  }

  /** From now on; `reset` also ends the connections open now. */
  set(mode: FaultMode): void {
    this.mode = mode
    if (mode.kind === 'reset') for (const pair of this.pairs) this.end(pair)
  }

  /**
   * Drops the next reply from Redis after its command was delivered, then does as `then` says
   * (passes, by default): the one lost reply a test asks for, whatever connection carries it.
   */
  dropNextReply(then: FaultMode = { kind: 'pass' }): void {
    this.set({ kind: 'drop-after-delivery', then })
  }

  async close(): Promise<void> {
    for (const pair of this.pairs) this.end(pair)
    this.server.close()
    await once(this.server, 'close')
  }

  private accept(client: Socket, target: { host: string; port: number }): void {
    if (this.mode.kind === 'reset') {
      client.destroy()
      return
    }
    const server = connect(target)
    const pair = { client, server }
    this.pairs.add(pair)
    client.on('data', (chunk) => this.forward(chunk, server))
    server.on('data', (chunk) => {
      if (this.mode.kind === 'drop-after-delivery') {
        this.droppedReplies++
        this.mode = this.mode.then
        this.end(pair)
        return
      }
      this.forward(chunk, client)
    })
    const end = () => this.end(pair)
    client.on('close', end)
    server.on('close', end)
    client.on('error', end)
    server.on('error', end)
  }

  private forward(chunk: Buffer, to: Socket): void {
    const { mode } = this
    if (mode.kind === 'delay') {
      setTimeout(() => {
        if (!to.destroyed) to.write(chunk)
      }, mode.delayMs)
      return
    }
    if (!to.destroyed) to.write(chunk)
  }

  private end(pair: { client: Socket; server: Socket }): void {
    this.pairs.delete(pair)
    pair.client.destroy()
    pair.server.destroy()
  }
}
