import { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest'
import { syncScript } from '../../packages/core/src/scripts/generated.js'
import { seededRandom } from '../src/seeded-random.js'

// lua/lib/fixed_window.lua answers most keys of a sync, one window and one segment, without its
// general sync: this holds it to the same answers. The same push goes to two keys holding the
// same value, once as its one segment and once with a segment of 0 units after it, which the
// general sync takes and which adds nothing: values, replies and TTLs must agree.
describe('a fixed window’s sync of one segment, against the general sync', () => {
  let client: Redis
  beforeAll(() => {
    client = new Redis(inject('redisUrl'))
  })
  afterAll(async () => {
    await client.quit()
  })

  const period = 60_000
  const now = 1_700_000_030_000
  const ends = now - (now % period) + period

  interface Case {
    /** The value both keys hold before, or undefined for none. */
    before: string | undefined
    /** Its TTL in ms when set. */
    ttl: number
    limit: number
    at: number
    units: number
  }

  function caseOf(random: (below: number) => number): Case {
    const count = random(4) === 0 ? 0 : random(2_000)
    const kinds = [
      // Compact, in now's window.
      () => `${ends}${count}${String(count).length}`,
      // Compact, in the window before.
      () => `${ends - period}${count}${String(count).length}`,
      // Compact, stamped by a faster clock: a window after now's.
      () => `${ends + period}${count}${String(count).length}`,
      // The text form, as a rule of several windows writes it.
      () => `${period}:${ends}:${count} `,
      () => undefined,
    ]
    const at = [now - random(period), ends - period - 1 - random(period), now + 1 + random(1_000), ends - period][
      random(4)
    ] as number
    const units = [1 + random(50), -1 - random(50), 0, -count][random(4)] as number
    return {
      before: (kinds[random(kinds.length)] as () => string | undefined)(),
      ttl: 1_000 + random(300_000),
      limit: 1 + random(2_000),
      at,
      units,
    }
  }

  async function pushed(key: string, c: Case, items: string): Promise<{ reply: unknown; value: string | null }> {
    if (c.before !== undefined) await client.set(key, c.before, 'PX', c.ttl)
    const reply = (await client.eval(syncScript.lua, 1, key, String(now), '', '', items)) as unknown[]
    // The first field is the server's time, which differs by the milliseconds between the calls.
    return { reply: reply.slice(1), value: await client.get(key) }
  }

  it('answers 2,000 cases as the general sync does', async () => {
    const random = seededRandom(33)
    for (let i = 0; i < 2_000; i++) {
      const c = caseOf(random)
      const rule = JSON.stringify(`fw ${c.limit} ${period}`)
      const one = `one:{${i}}`
      const general = `general:{${i}}`
      const a = await pushed(one, c, `[${rule},2,${c.at},${c.units}]`)
      const b = await pushed(general, c, `[${rule},4,${c.at},${c.units},${c.at},0]`)
      expect({ case: c, ...a }).toEqual({ case: c, ...b })
      const [ttlA, ttlB] = [await client.pttl(one), await client.pttl(general)]
      // Both written in the same millisecond or two of real time: a kept TTL or ends − now alike.
      expect(Math.abs(ttlA - ttlB), JSON.stringify(c)).toBeLessThanOrEqual(50)
      expect(await client.exists(`${one}:prev`)).toBe(await client.exists(`${general}:prev`))
    }
  })

  it('fails a key of another type alone, as the general sync does, and writes nothing to it', async () => {
    await client.multi().rpush('other:{type}', 'x').pexpire('other:{type}', 60_000).exec()
    const reply = (await client.eval(
      syncScript.lua,
      2,
      'other:{type}',
      'beside:{type}',
      String(now),
      '',
      '',
      `["fw 10 ${period}",2,${now},3,2,${now},3]`,
    )) as unknown[]
    const values = String(reply[2]).split('\n')
    expect(values[0]).toMatch(/^!.*WRONGTYPE/)
    expect(values[1]).toBe(`${ends}31`)
    expect(await client.lrange('other:{type}', 0, -1)).toEqual(['x'])
  })
})
