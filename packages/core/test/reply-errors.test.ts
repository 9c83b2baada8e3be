import { describe, expect, it } from 'vitest'
import { isRedirectedToTheEnd } from '../src/redis-clients/reply-errors.js'

describe('isRedirectedToTheEnd', () => {
  it("knows a Cluster client's giving up on redirections that Redis kept answering", () => {
    // ioredis's and iovalkey's own error, around the last redirection (test/tests/hybrid-cluster.test.ts meets it on a real Cluster).
    for (const last of [
      'TRYAGAIN Multiple keys request during rehashing of slot',
      'ASK 14907 127.0.0.1:7001',
      'MOVED 14907 127.0.0.1:7001',
    ]) {
      expect(isRedirectedToTheEnd(new Error(`Too many Cluster redirections. Last error: ReplyError: ${last}`))).toBe(
        true,
      )
      // node-redis throws the last redirection itself.
      expect(isRedirectedToTheEnd(new Error(last))).toBe(true)
    }
  })

  it('is not a connection lost, another reply, or no error at all', () => {
    expect(
      isRedirectedToTheEnd(new Error('Too many Cluster redirections. Last error: Error: Connection is closed.')),
    ).toBe(false)
    expect(isRedirectedToTheEnd(new Error('CLUSTERDOWN The cluster is down'))).toBe(false)
    expect(isRedirectedToTheEnd(new Error('ERR unknown command'))).toBe(false)
    expect(isRedirectedToTheEnd('MOVED 1 127.0.0.1:7001')).toBe(false)
    expect(isRedirectedToTheEnd(undefined)).toBe(false)
  })
})
