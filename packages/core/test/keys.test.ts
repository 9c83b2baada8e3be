import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import {
  encodeKeyPart,
  KeyBuilder,
  MAX_IDENTIFIER_LENGTH,
  validateIdentifier,
  validatePrefix,
} from '../src/rules/keys.js'
import { ALGORITHMS } from '../src/rules/rules.js'
import { TollgateArgumentError, TollgateConfigError } from '../src/support/errors.js'

const HASHED = /^#[A-Za-z0-9_-]{27}$/

/** The text Redis Cluster hashes: between the first '{' and the first '}' after it. */
function hashTag(key: string): string | undefined {
  const open = key.indexOf('{')
  if (open < 0) return undefined
  const close = key.indexOf('}', open + 1)
  if (close < 0) return undefined
  return key.slice(open + 1, close)
}

describe('key layout', () => {
  it('is <prefix><rule>:{<identifier>}:<algorithm code>', () => {
    const keys = new KeyBuilder('tg:')
    expect(keys.key('auth.createToken', 'sliding-log', 'ip:203.0.113.7')).toBe(
      'tg:auth.createToken:{ip:203.0.113.7}:sl',
    )
  })

  it('gives every algorithm its own code', () => {
    const keys = new KeyBuilder('')
    const codes = ALGORITHMS.map((algorithm) => keys.key('r', algorithm, 'i').split(':').pop())
    expect(codes).toEqual(['sl', 'fw', 'sw', 'tb', 'gc'])
  })

  it('works without a prefix', () => {
    expect(new KeyBuilder('').key('api', 'gcra', 'user-42')).toBe('api:{user-42}:gc')
  })

  it('encodes the rule part too', () => {
    const key = new KeyBuilder('tg:').key('a rule', 'token-bucket', 'user-42')
    expect(key).toBe(`tg:${encodeKeyPart('a rule')}:{user-42}:tb`)
  })

  it('builds the same key again for the same parts (the rule part is cached)', () => {
    const keys = new KeyBuilder('tg:')
    const first = keys.key('r{1}', 'sliding-log', 'x')
    expect(keys.key('r{1}', 'sliding-log', 'x')).toBe(first)
    expect(keys.key('r{1}', 'sliding-log', 'y')).not.toBe(first)
  })
})

describe('encodeKeyPart', () => {
  it.each(['user-42', 'ip:203.0.113.7', 'ip6:2001:db8::/56', 'a@example.com', 'x+y=z/w', 'A.B_C-d', 'a'.repeat(64)])(
    'writes %s raw',
    (part) => {
      expect(encodeKeyPart(part)).toBe(part)
    },
  )

  it("writes ':' raw: the rule part is closed by ':{', and raw parts hold no '{'", () => {
    expect(encodeKeyPart('a:b')).toBe('a:b')
    const keys = new KeyBuilder('')
    expect(keys.key('a:b', 'sliding-log', 'c')).not.toBe(keys.key('a', 'sliding-log', 'b:c'))
    expect(keys.key('a:', 'sliding-log', 'b')).not.toBe(keys.key('a', 'sliding-log', ':b'))
  })

  it.each([
    ['a 65-character part', 'a'.repeat(65)],
    ['an empty part', ''],
    ["'{'", '{'],
    ["'}'", '}'],
    ["'a{b}'", 'a{b}'],
    ["'#'", '#'],
    ["a raw-looking hash '#abc'", '#abc'],
    ['NUL', '\0'],
    ['a space', 'a b'],
    ['a newline', 'a\nb'],
    ['non-ASCII', 'é'],
    ['CJK', '日本'],
    ['an emoji', '👍'],
    ['a lone high surrogate', '\uD800'],
    ['a lone low surrogate', '\uDC00'],
    ['U+FFFD', '\uFFFD'],
    ['a 10 KB string', 'x'.repeat(10_240)],
    ['a 10 KB string of braces', '{}'.repeat(5_120)],
  ])('hashes %s to # and 27 base64url characters', (_, part) => {
    expect(encodeKeyPart(part)).toMatch(HASHED)
  })

  it('tells lone surrogates from U+FFFD and from each other', () => {
    const parts = ['\uD800', '\uDC00', '\uFFFD', '\uD800\uDC00', '\uDC00\uD800', '\uD800\uD800', '?']
    const encoded = parts.map(encodeKeyPart)
    expect(new Set(encoded).size).toBe(parts.length)
  })

  it('tells strings apart that UTF-8 would not', () => {
    expect(encodeKeyPart('a\uD800b')).not.toBe(encodeKeyPart('a\uFFFDb'))
    expect(encodeKeyPart('a\uD800b')).not.toBe(encodeKeyPart('a\uDBFFb'))
  })

  it('does not confuse a raw part with a hashed one', () => {
    const hashed = encodeKeyPart('a b')
    expect(encodeKeyPart(hashed)).not.toBe(hashed)
    expect(encodeKeyPart(hashed)).toMatch(HASHED)
  })

  it('is deterministic', () => {
    expect(encodeKeyPart('ünïcödé')).toBe(encodeKeyPart('ünïcödé'))
  })
})

describe('Cluster hash tags', () => {
  it('is the encoded identifier, the same for every rule and algorithm', () => {
    const keys = new KeyBuilder('tg:')
    for (const identifier of ['user-42', 'ip:203.0.113.7', 'a{b}c', '}{', '日本', '\uD800']) {
      const tags = new Set<string | undefined>()
      for (const rule of ['api', 'auth.createToken', 'r{1}', '}', '日本', 'a:b']) {
        for (const algorithm of ALGORITHMS) tags.add(hashTag(keys.key(rule, algorithm, identifier)))
      }
      expect([...tags]).toEqual([encodeKeyPart(identifier)])
    }
  })

  it('never holds a brace, even for identifiers full of them', () => {
    const keys = new KeyBuilder('tg:')
    for (const identifier of ['{', '}', '{}', '}{', '{{a}}', 'a}b{c']) {
      const tag = hashTag(keys.key('{rule}', 'sliding-log', identifier))
      expect(tag).toMatch(HASHED)
    }
  })

  it('differs between identifiers, so they spread over slots', () => {
    const keys = new KeyBuilder('tg:')
    expect(hashTag(keys.key('api', 'gcra', 'a'))).not.toBe(hashTag(keys.key('api', 'gcra', 'b')))
  })
})

describe('validatePrefix', () => {
  it.each(['', 'tg:', 'tollgate:prod:', 'p'.repeat(64), '#', 'a b'])('accepts %j', (prefix) => {
    expect(validatePrefix(prefix)).toBe(prefix)
  })

  it.each([
    ['{', '"{"'],
    ['}', '"}"'],
    ['tg:{x}:', '"tg:{x}:"'],
    ['p'.repeat(65), '"pppppppp'],
    [42, '42'],
    [null, 'null'],
  ])('refuses %j with a TollgateConfigError naming it', (prefix, shown) => {
    expect(() => validatePrefix(prefix)).toThrow(TollgateConfigError)
    expect(() => validatePrefix(prefix)).toThrow(`got ${shown}`)
  })

  it('is applied by KeyBuilder', () => {
    expect(() => new KeyBuilder('tg:{')).toThrow(TollgateConfigError)
  })
})

describe('validateIdentifier', () => {
  it(`accepts up to MAX_IDENTIFIER_LENGTH (${MAX_IDENTIFIER_LENGTH}) characters`, () => {
    const identifier = 'x'.repeat(MAX_IDENTIFIER_LENGTH)
    expect(validateIdentifier(identifier)).toBe(identifier)
  })

  it.each([
    ['one character more', 'x'.repeat(MAX_IDENTIFIER_LENGTH + 1), 'got one of 16385'],
    ['an empty string', '', 'got ""'],
    ['a number', 1, 'got 1'],
    ['undefined', undefined, 'got undefined'],
  ])('refuses %s', (_, identifier, shown) => {
    expect(() => validateIdentifier(identifier)).toThrow(TollgateArgumentError)
    expect(() => validateIdentifier(identifier)).toThrow(shown)
  })
})

describe('properties', () => {
  const utf16 = fc.string({ unit: fc.integer({ min: 0, max: 0xffff }).map((code) => String.fromCharCode(code)) })
  const rawish = fc.string({ unit: fc.constantFrom(...'ab:.{}#-_ @/'), maxLength: 70 })
  const parts = fc.oneof(
    fc.string({ unit: 'binary' }),
    fc.string({ unit: 'grapheme' }),
    fc.string({ unit: 'binary-ascii' }),
    utf16,
    rawish,
  )
  const longParts = fc.oneof(
    fc.string({ unit: 'binary', maxLength: 20_000 }),
    fc.string({ unit: 'grapheme', maxLength: 20_000 }),
    fc.string({
      unit: fc.integer({ min: 0, max: 0xffff }).map((code) => String.fromCharCode(code)),
      maxLength: 20_000,
    }),
  )
  const prefixes = fc.string({ maxLength: 64 }).filter((prefix) => !/[{}]/.test(prefix))
  const algorithms = fc.constantFrom(...ALGORITHMS)

  it('gives distinct identifiers distinct keys', () => {
    const keys = new KeyBuilder('tg:')
    fc.assert(
      fc.property(parts, parts, algorithms, (a, b, algorithm) => {
        fc.pre(a !== b)
        expect(keys.key('api', algorithm, a)).not.toBe(keys.key('api', algorithm, b))
      }),
      { numRuns: 2_000 },
    )
  })

  it('gives distinct (rule, identifier) pairs distinct keys', () => {
    const keys = new KeyBuilder('tg:')
    fc.assert(
      fc.property(parts, parts, parts, parts, (ruleA, idA, ruleB, idB) => {
        fc.pre(ruleA !== ruleB || idA !== idB)
        expect(keys.key(ruleA, 'sliding-log', idA)).not.toBe(keys.key(ruleB, 'sliding-log', idB))
      }),
      { numRuns: 2_000 },
    )
  })

  it('gives distinct long identifiers distinct keys', () => {
    const keys = new KeyBuilder('tg:')
    fc.assert(
      fc.property(longParts, longParts, (a, b) => {
        fc.pre(a !== b)
        expect(keys.key('api', 'gcra', a)).not.toBe(keys.key('api', 'gcra', b))
      }),
      { numRuns: 50 },
    )
  })

  it('tells apart identifiers that differ in one code unit', () => {
    const keys = new KeyBuilder('tg:')
    fc.assert(
      fc.property(longParts, fc.nat(), fc.integer({ min: 0, max: 0xffff }), (base, at, code) => {
        fc.pre(base.length > 0)
        const index = at % base.length
        const changed = base.slice(0, index) + String.fromCharCode(code) + base.slice(index + 1)
        fc.pre(changed !== base)
        expect(keys.key('api', 'gcra', changed)).not.toBe(keys.key('api', 'gcra', base))
      }),
      { numRuns: 100 },
    )
  })

  it('keeps keys within 200 characters, with a brace-free, non-empty hash tag equal to the encoded identifier', () => {
    fc.assert(
      fc.property(
        prefixes,
        fc.oneof(parts, longParts),
        fc.oneof(parts, longParts),
        algorithms,
        (prefix, rule, id, algorithm) => {
          const key = new KeyBuilder(prefix).key(rule, algorithm, id)
          expect(key.length).toBeLessThanOrEqual(200)
          const tag = hashTag(key)
          expect(tag).toBe(encodeKeyPart(id))
          expect(tag).not.toMatch(/[{}]/)
          expect(tag?.length).toBeGreaterThan(0)
          expect(key.startsWith(prefix)).toBe(true)
        },
      ),
      { numRuns: 300 },
    )
  })

  it('hashes exactly the parts that are not short and safe', () => {
    fc.assert(
      fc.property(parts, (part) => {
        const encoded = encodeKeyPart(part)
        if (/^[A-Za-z0-9._:@+=/-]{1,64}$/.test(part)) expect(encoded).toBe(part)
        else expect(encoded).toMatch(HASHED)
      }),
      { numRuns: 2_000 },
    )
  })
})
