import type { IncomingMessage, ServerResponse } from 'node:http'
import { Controller, HttpCode, Post, Req } from '@nestjs/common'
import { RateLimit } from '@tollgate/nestjs'

@Controller('upload')
export class UploadsController {
  @Post()
  @HttpCode(200)
  @RateLimit({ rule: 'upload.bytes', cost: contentLength, quotaUnit: 'content-bytes' })
  async upload(@Req() req: IncomingMessage) {
    // Raw bytes: Nest parses JSON and form bodies only, so the stream is still unread here.
    let received = 0
    for await (const chunk of req) received += (chunk as Buffer).length
    return { received }
  }
}

function contentLength(req: IncomingMessage): number {
  return Number(req.headers['content-length'])
}

/**
 * The byte quota is charged before the body is read, by the length it declares, and Node stops a
 * body at that length. A chunked upload declares none and would cost nothing: it is refused, by a
 * middleware, which Nest runs before any guard.
 */
export function requireContentLength(req: IncomingMessage, res: ServerResponse, next: () => void): void {
  if (req.headers['content-length'] !== undefined) {
    next()
    return
  }
  res.writeHead(411, { 'content-type': 'application/problem+json' }).end(LENGTH_REQUIRED)
}

const LENGTH_REQUIRED = JSON.stringify({
  type: 'about:blank',
  title: 'Length Required',
  status: 411,
  detail: 'An upload must declare its Content-Length: it is counted in bytes before it arrives.',
})
