import { describe, expect, it } from 'vitest'
import * as api from '../src/index.js'

describe('public API', () => {
  it('exports these values and no others (types vanish at runtime)', () => {
    expect(Object.keys(api).sort()).toEqual(['byIpAndUser', 'default', 'ipIdentifier', 'tollgate', 'userIdentifier'])
    expect(api.default).toBe(api.tollgate)
  })
})
