import { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest'
import { decideScript, leaseScript, syncScript } from '../../packages/core/src/scripts/generated.js'

// What every script reads the same way (lua/lib/time.lua, lua/lib/rule_text.lua): a time a
// process sent, and a rule's text. The stores never send what these refuse; the scripts refuse it
// all the same, before anything is written, since a bad time would corrupt every window it touched.
describe('Redis scripts, the inputs they share', () => {
  let client: Redis
  beforeAll(() => {
    client = new Redis(inject('redisUrl'))
  })
  afterAll(() => {
    client.disconnect()
  })

  const badTimes = ['1.5', '-1', '8640000000000001', 'soon']

  it.each(badTimes)('decide: a time of %s fails its decision alone, and writes nothing', async (time) => {
    const reply = (await client.eval(
      decideScript.lua,
      2,
      `inputs:{d1 ${time}}:fw`,
      `inputs:{d2 ${time}}:fw`,
      `consume 1 ${time} fw 10 60000`,
      'consume 1 1700000000000 fw 10 60000',
    )) as unknown[]
    // Lua's error() puts where it was raised before the message.
    expect(String(reply[0])).toMatch(
      / the clock sent \S+ as the time; a time is whole milliseconds from 0 to 8640000000000000$/,
    )
    expect(String(reply[0])).toContain(` ${time} `)
    expect(reply.slice(1)).toEqual([2 * 1_700_000_000_000 + 1, 9, 1_700_000_040_000, 1_700_000_000_000])
    expect(await client.exists(`inputs:{d1 ${time}}:fw`)).toBe(0)
  })

  it.each(badTimes)('sync and lease: a time of %s fails the call, and writes nothing', async (time) => {
    const calls = [
      client.eval(syncScript.lua, 1, 'inputs:{s}:fw', time, '', '', '["fw 10 60000",2,1700000000000,3]'),
      client.eval(leaseScript.lua, 1, 'inputs:{l}:fw', time, '-', '', '', 'i1', 'fw 10 60000|4|0|'),
    ]
    for (const call of calls) {
      await expect(call).rejects.toThrow(
        `the clock sent ${time} as the time; a time is whole milliseconds from 0 to 8640000000000000`,
      )
    }
    expect(await client.exists('inputs:{s}:fw', 'inputs:{l}:fw')).toBe(0)
  })

  it('a rule of an algorithm a script does not keep fails with its code, and writes nothing', async () => {
    // Sliding logs cannot be summed as counters, and lease slices only fit the window counters.
    await expect(
      client.eval(syncScript.lua, 1, 'inputs:{s}:sl', '1700000000000', '', '', '["sl 10 60000",2,1700000000000,3]'),
    ).rejects.toThrow('no algorithm sl in this script, in the rule sl 10 60000')
    await expect(
      client.eval(leaseScript.lua, 1, 'inputs:{l}:tb', '1700000000000', '-', '', '', 'i1', 'tb 10 60000|4|0|'),
    ).rejects.toThrow('no algorithm tb in this script, in the rule tb 10 60000')
    expect(await client.exists('inputs:{s}:sl', 'inputs:{l}:tb')).toBe(0)
  })

  it('parses one rule text the same in every script: a window that sheds keeps its counter', async () => {
    // decide charges 2 on a fixed window whose text carries a low burst; sync, reading the same
    // text, adds 3 to that same count.
    const now = 1_700_000_000_000
    const key = 'inputs:{same}:fw'
    const decided = (await client.eval(decideScript.lua, 1, key, `consume 2 ${now} fw 10 60000/5`)) as number[]
    expect(decided[0]).toBe(2 * now + 1)
    const synced = (await client.eval(
      syncScript.lua,
      1,
      key,
      String(now),
      '',
      '',
      `["fw 10 60000/5",2,${now},3]`,
    )) as unknown[]
    expect(synced.slice(0, 2)).toEqual([expect.any(Number), -1])
    const peeked = (await client.eval(decideScript.lua, 1, key, `peek 1 ${now} fw 10 60000`)) as number[]
    // 10 less the 2 decided and the 3 synced.
    expect(peeked[1]).toBe(5)
  })

  it('sync: units folded for a rule that is not a bucket fail their entry alone, and write nothing', async () => {
    const now = 1_700_000_000_000
    const reply = (await client.eval(
      syncScript.lua,
      2,
      'inputs:{folded}:fw',
      'inputs:{folded}:tb',
      String(now),
      '',
      '',
      `["fw 10 60000",-5,${now},${now},3,3,3,"tb 10 60000",-5,${now},${now},3,18000,18000]`,
    )) as unknown[]
    const values = String(reply[2]).split('\n')
    expect(values[0]).toBe('!units folded for a rule that is not a bucket')
    // 3 tokens of a bucket whose token is 6,000 units: 18,000.
    expect(values[1]).not.toBe('')
    expect(reply).toHaveLength(3)
    expect(await client.exists('inputs:{folded}:fw')).toBe(0)
    const peeked = (await client.eval(
      decideScript.lua,
      1,
      'inputs:{folded}:tb',
      `peek 1 ${now} tb 10 60000`,
    )) as number[]
    expect(peeked[1]).toBe(7)
  })

  it('sync: an entry whose count runs past the items fails the call, and writes nothing', async () => {
    const now = 1_700_000_000_000
    const calls = [
      // Two numbers said, one sent.
      client.eval(syncScript.lua, 1, 'inputs:{count}:fw', String(now), '', '', `["fw 10 60000",2,${now}]`),
      // A count that is not a whole number.
      client.eval(syncScript.lua, 1, 'inputs:{count}:fw', String(now), '', '', `["fw 10 60000",1.5,${now},3]`),
      // An entry that is neither a count nor a rule's text.
      client.eval(syncScript.lua, 1, 'inputs:{count}:fw', String(now), '', '', `["fw 10 60000",[${now},3]]`),
      // The same with entries after it, which must not be read as its numbers.
      client.eval(syncScript.lua, 1, 'inputs:{count}:fw', String(now), '', '', `["fw 10 60000",[${now},3],2,${now},3]`),
    ]
    for (const call of calls) await expect(call).rejects.toThrow('does not hold its count of numbers')
    await expect(
      client.eval(syncScript.lua, 1, 'inputs:{count}:fw', String(now), '', '', 'fw 10 60000\n'),
    ).rejects.toThrow()
    expect(await client.exists('inputs:{count}:fw')).toBe(0)
  })
})
