import { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest'
import { syncScript } from '../../packages/core/src/scripts/generated.js'
import { seededRandom } from '../src/seeded-random.js'

// lua/lib/fixed_window.lua and sliding_window.lua answer most keys of a sync, one window and one
// segment, without their general sync: this holds them to the same answers. The same push goes to
// two keys holding the same value, once as its one segment and once with a segment of 0 units
// after it, which the general sync takes and which adds nothing: values, replies and TTLs must agree.
const period = 60_000
const now = 1_700_000_030_000
const start = now - (now % period)

const digits = (n: number): number => String(n).length

interface Algorithm {
  code: string
  /** Values a key may hold before: addable and compact in and around now's window, the text form, none. */
  values(random: (below: number) => number): Array<string | undefined>
}

const algorithms: Algorithm[] = [
  {
    code: 'fw',
    values: (random) => {
      const count = random(4) === 0 ? 0 : random(2_000)
      const ends = start + period
      // The addable form, -(seconds × 1,000,000 + count); near its bound a push passes it.
      const addable = (endsAt: number, c: number): string => String(-((endsAt / 1000) * 1_000_000 + c))
      return [
        addable(ends, count),
        addable(ends, 999_950 + random(50)),
        addable(ends - period, count),
        addable(ends + period, count),
        `${ends}${count}${digits(count)}`,
        // A compact count of 9 digits: more digits than an integer's range, which DECRBY refuses.
        `${ends}${999_999_000 + random(999)}9`,
        // The window before; one a faster clock stamped, after now's.
        `${ends - period}${count}${digits(count)}`,
        `${ends + period}${count}${digits(count)}`,
        `${period}:${ends}:${count} `,
        undefined,
      ]
    },
  },
  {
    code: 'sw',
    values: (random) => {
      const count = random(4) === 0 ? 0 : random(2_000)
      const previous = random(3) === 0 ? 0 : random(2_000)
      const compact = (expiresAt: number, c: number): string =>
        `${expiresAt}${c}${previous}${digits(c)}${digits(previous)}`
      return [
        // Counting in now's window; with a count of 0, whose state ends a window earlier.
        compact(start + 2 * period, count),
        compact(start + period, 0),
        // Counting in the window before, or in one a faster clock stamped.
        compact(start + period, count),
        compact(start + 3 * period, count),
        `${period}:${start + 2 * period}:${count}:${previous} `,
        undefined,
      ]
    },
  },
]

describe.each(algorithms)('a $code sync of one segment, against the general sync', ({ code, values }) => {
  let client: Redis
  beforeAll(() => {
    client = new Redis(inject('redisUrl'))
  })
  afterAll(async () => {
    await client.quit()
  })

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
    const choices = values(random)
    const at = [now - random(now - start), start - 1 - random(period), now + 1 + random(1_000), start][
      random(4)
    ] as number
    const units = [1 + random(50), -1 - random(50), 0, -random(2_000)][random(4)] as number
    return {
      before: choices[random(choices.length)],
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
      const rule = JSON.stringify(`${code} ${c.limit} ${period}`)
      const one = `one:{${code} ${i}}`
      const general = `general:{${code} ${i}}`
      const a = await pushed(one, c, `[${rule},2,${c.at},${c.units}]`)
      const b = await pushed(general, c, `[${rule},4,${c.at},${c.units},${c.at},0]`)
      expect({ case: c, ...a }).toEqual({ case: c, ...b })
      const [ttlA, ttlB] = [await client.pttl(one), await client.pttl(general)]
      // Both written within a few ms of real time: a kept TTL, or the state's end less now, alike.
      expect(Math.abs(ttlA - ttlB), JSON.stringify(c)).toBeLessThanOrEqual(50)
      expect(await client.exists(`${one}:prev`)).toBe(await client.exists(`${general}:prev`))
    }
  })

  // A call's keys in runs of new ones and ones already there: the fixed window tries a SET … NX
  // first after a new key, and DECRBY first after one that was there.
  it('answers a call of 200 keys, new and not in runs, as the general sync does key by key', async () => {
    const random = seededRandom(34)
    for (let round = 0; round < 10; round++) {
      const cases: Case[] = []
      let absent = random(2) === 0
      for (let i = 0; i < 200; i++) {
        if (random(8) === 0) absent = !absent
        const c = caseOf(random)
        cases.push(absent ? { ...c, before: undefined } : c)
      }
      const rule = JSON.stringify(`${code} ${Math.max(...cases.map((c) => c.limit))} ${period}`)
      const write = async (
        prefix: string,
        items: string,
      ): Promise<{ reply: unknown; values: Array<string | null> }> => {
        const keys = cases.map((_, i) => `${prefix}:{${code} ${round} ${i}}`)
        for (const [i, c] of cases.entries()) {
          if (c.before !== undefined) await client.set(keys[i] as string, c.before, 'PX', c.ttl)
        }
        const reply = (await client.eval(syncScript.lua, keys.length, ...keys, String(now), '', '', items)) as unknown[]
        return { reply: reply.slice(1), values: await client.mget(...keys) }
      }
      const one = await write('runs-one', `[${rule},${cases.map((c) => `2,${c.at},${c.units}`).join(',')}]`)
      const general = await write(
        'runs-general',
        `[${rule},${cases.map((c) => `4,${c.at},${c.units},${c.at},0`).join(',')}]`,
      )
      expect(one).toEqual(general)
    }
  })

  it('fails a key of another type alone, as the general sync does, and writes nothing to it', async () => {
    const other = `other:{${code}}`
    await client.multi().rpush(other, 'x').pexpire(other, 60_000).exec()
    const reply = (await client.eval(
      syncScript.lua,
      2,
      other,
      `beside:{${code}}`,
      String(now),
      '',
      '',
      `["${code} 10 ${period}",2,${now},3,2,${now},3]`,
    )) as unknown[]
    const values = String(reply[2]).split('\n')
    expect(values[0]).toMatch(/^!.*WRONGTYPE/)
    expect(values[1]).not.toBe('')
    expect(await client.lrange(other, 0, -1)).toEqual(['x'])
  })
})
