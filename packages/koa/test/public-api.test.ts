import { expect, it } from 'vitest'

it('exports exactly these values (types vanish at runtime): a change here is a change to the public API', async () => {
  expect(Object.keys(await import('../src/index.js')).sort()).toEqual([
    'byIpAndUser',
    'ipIdentifier',
    'rateLimit',
    'userIdentifier',
  ])
})
