import { request } from 'node:http'
import type { AddressInfo } from 'node:net'
import { describe, expect, it } from 'vitest'
import { appWith } from './app.js'

/** A POST of `body` to the app, declaring its length or sent in chunks; its status and RateLimit field. */
function post(port: number, body: string, chunked: boolean): Promise<{ status: number; rateLimit: string }> {
  return new Promise((resolve, reject) => {
    const headers = chunked ? { 'transfer-encoding': 'chunked' } : { 'content-length': String(Buffer.byteLength(body)) }
    const asked = request({ host: '127.0.0.1', port, path: '/upload', method: 'POST', headers }, (response) => {
      response.resume()
      response.on('end', () =>
        resolve({ status: response.statusCode ?? 0, rateLimit: String(response.headers.ratelimit) }),
      )
    })
    asked.on('error', reject)
    asked.end(body)
  })
}

// The READMEs' upload route charges the length a request declares; one sent in chunks declares
// none, and the READMEs said it then costs 0 while their cost function failed it with a 500.
describe("the READMEs' upload cost, without the hook that refuses chunked uploads", () => {
  it('charges a declared length by its bytes, and an upload sent in chunks 0', async () => {
    const app = await appWith({ global: false, rule: 'upload', windows: [{ limit: 1_000, period: '1m' }] })
    app.addContentTypeParser('*', (_request, payload, done) => {
      payload.resume()
      payload.on('end', () => done(null))
    })
    app.post(
      '/upload',
      { config: { rateLimit: { cost: (request) => Number(request.headers['content-length'] ?? 0) } } },
      async () => 'stored',
    )
    await app.listen({ port: 0, host: '127.0.0.1' })
    const { port } = app.server.address() as AddressInfo
    expect(await post(port, 'x'.repeat(100), false)).toMatchObject({
      status: 200,
      rateLimit: expect.stringContaining('r=900'),
    })
    expect(await post(port, 'x'.repeat(100), true)).toMatchObject({
      status: 200,
      rateLimit: expect.stringContaining('r=900'),
    })
  })
})
