import { describe, expect, it } from 'vitest'
import { ipIdentifier } from '../src/identifiers/ip.js'
import { userIdentifier } from '../src/identifiers/user.js'
import { TollgateArgumentError, TollgateConfigError } from '../src/support/errors.js'

function expectArgumentError(call: () => unknown, shown: string): void {
  let thrown: unknown
  try {
    call()
  } catch (error) {
    thrown = error
  }
  expect(thrown).toBeInstanceOf(TollgateArgumentError)
  expect(thrown).toBeInstanceOf(TypeError)
  expect(thrown).toHaveProperty('code', 'TG_INVALID_ARGUMENT')
  expect((thrown as Error).message).toContain(shown)
}

function expectConfigError(call: () => unknown, shown: string): void {
  let thrown: unknown
  try {
    call()
  } catch (error) {
    thrown = error
  }
  expect(thrown).toBeInstanceOf(TollgateConfigError)
  expect(thrown).toHaveProperty('code', 'TG_CONFIG')
  expect((thrown as Error).message).toContain('ipv6Subnet')
  expect((thrown as Error).message).toContain(shown)
}

describe('ipIdentifier: IPv4', () => {
  it.each(['203.0.113.7', '0.0.0.0', '255.255.255.255', '10.0.0.1', '127.0.0.1', '1.2.3.4'])(
    'keys %s on the exact address',
    (address) => {
      expect(ipIdentifier(address)).toBe(`ip:${address}`)
    },
  )

  it('ignores ipv6Subnet', () => {
    expect(ipIdentifier('203.0.113.7', { ipv6Subnet: 8 })).toBe('ip:203.0.113.7')
  })

  it.each([
    '01.2.3.4',
    '1.02.3.4',
    '1.2.3.00',
    '010.0.0.1',
    '256.1.1.1',
    '1.2.3.256',
    '1.2.3.999',
    '1.2.3.1000',
    '1.2.3',
    '1.2.3.4.5',
    '1.2..4',
    '.1.2.3.4',
    '1.2.3.4.',
    '1.2.3.-4',
    '1.2.3.+4',
    '1.2.3.4a',
    '0x1.2.3.4',
    '16909060',
    ' 1.2.3.4',
    '1.2.3.4 ',
    '1.2.3.4\n',
    '[1.2.3.4]',
    '1.2.3.4%eth0',
    '1.2.3.4/32',
    '1.2.3.4:80',
  ])('rejects %j', (address) => {
    expectArgumentError(() => ipIdentifier(address), JSON.stringify(address))
  })
})

describe('ipIdentifier: IPv4-mapped IPv6', () => {
  it.each([
    '::ffff:203.0.113.7',
    '::FFFF:203.0.113.7',
    '::ffff:cb00:7107',
    '::FFFF:cb00:7107',
    '::ffff:CB00:7107',
    '0:0:0:0:0:ffff:203.0.113.7',
    '0:0:0:0:0:ffff:cb00:7107',
    '0000:0000:0000:0000:0000:ffff:cb00:7107',
    '0::ffff:203.0.113.7',
    '[::ffff:203.0.113.7]',
    '::ffff:203.0.113.7%eth0',
  ])('gives %s the identifier of the plain IPv4 address', (address) => {
    expect(ipIdentifier(address)).toBe('ip:203.0.113.7')
  })

  it('ignores ipv6Subnet, as for plain IPv4', () => {
    expect(ipIdentifier('::ffff:203.0.113.7', { ipv6Subnet: 8 })).toBe('ip:203.0.113.7')
    expect(ipIdentifier('::ffff:203.0.113.7', { ipv6Subnet: 128 })).toBe('ip:203.0.113.7')
  })

  it('writes octets without leading zeros', () => {
    expect(ipIdentifier('::ffff:0:1')).toBe('ip:0.0.0.1')
    expect(ipIdentifier('::ffff:a00:1')).toBe('ip:10.0.0.1')
    expect(ipIdentifier('::ffff:ffff:ffff')).toBe('ip:255.255.255.255')
  })

  it('treats other IPv4-in-IPv6 forms as IPv6', () => {
    expect(ipIdentifier('::203.0.113.7', { ipv6Subnet: 128 })).toBe('ip:::cb00:7107/128')
    expect(ipIdentifier('64:ff9b::203.0.113.7', { ipv6Subnet: 128 })).toBe('ip:64:ff9b::cb00:7107/128')
    expect(ipIdentifier('::1:ffff:203.0.113.7', { ipv6Subnet: 128 })).toBe('ip:::1:ffff:cb00:7107/128')
  })

  it('rejects a non-canonical embedded IPv4 tail', () => {
    expectArgumentError(() => ipIdentifier('::ffff:01.2.3.4'), '"::ffff:01.2.3.4"')
    expectArgumentError(() => ipIdentifier('::ffff:256.2.3.4'), '"::ffff:256.2.3.4"')
    expectArgumentError(() => ipIdentifier('::ffff:1.2.3'), '"::ffff:1.2.3"')
  })
})

describe('ipIdentifier: IPv6', () => {
  it('keys on the /56 network by default', () => {
    expect(ipIdentifier('2001:db8:1234:56ab:1:2:3:4')).toBe('ip:2001:db8:1234:5600::/56')
  })

  it('keys on the exact address with ipv6Subnet 128', () => {
    expect(ipIdentifier('2001:db8:1234:56ab:1:2:3:4', { ipv6Subnet: 128 })).toBe('ip:2001:db8:1234:56ab:1:2:3:4/128')
  })

  it('keys on the /64 network with ipv6Subnet 64', () => {
    expect(ipIdentifier('2001:db8:1234:56ab:1:2:3:4', { ipv6Subnet: 64 })).toBe('ip:2001:db8:1234:56ab::/64')
  })

  it('uses the default when ipv6Subnet is undefined', () => {
    expect(ipIdentifier('2001:db8:1234:56ab::1', {})).toBe('ip:2001:db8:1234:5600::/56')
    expect(ipIdentifier('2001:db8:1234:56ab::1', { ipv6Subnet: undefined })).toBe('ip:2001:db8:1234:5600::/56')
  })

  it.each([
    [1, 'ip:::/1'],
    [3, 'ip:2000::/3'],
    [16, 'ip:2001::/16'],
    [17, 'ip:2001::/17'],
    [21, 'ip:2001:800::/21'],
    [32, 'ip:2001:db8::/32'],
    [44, 'ip:2001:db8:fff0::/44'],
    [48, 'ip:2001:db8:ffff::/48'],
    [52, 'ip:2001:db8:ffff:f000::/52'],
    [56, 'ip:2001:db8:ffff:ff00::/56'],
    [60, 'ip:2001:db8:ffff:fff0::/60'],
    [63, 'ip:2001:db8:ffff:fffe::/63'],
    [64, 'ip:2001:db8:ffff:ffff::/64'],
    [65, 'ip:2001:db8:ffff:ffff:8000::/65'],
    [112, 'ip:2001:db8:ffff:ffff:ffff:ffff:ffff:0/112'],
    [127, 'ip:2001:db8:ffff:ffff:ffff:ffff:ffff:fffe/127'],
    [128, 'ip:2001:db8:ffff:ffff:ffff:ffff:ffff:ffff/128'],
  ])('masks to the first %i bits', (ipv6Subnet, expected) => {
    expect(ipIdentifier('2001:db8:ffff:ffff:ffff:ffff:ffff:ffff', { ipv6Subnet })).toBe(expected)
  })

  it('gives two addresses in the same /56 one identifier', () => {
    const first = ipIdentifier('2001:db8:1234:5600::1')
    expect(first).toBe('ip:2001:db8:1234:5600::/56')
    expect(ipIdentifier('2001:db8:1234:56ff:ffff:ffff:ffff:ffff')).toBe(first)
    expect(ipIdentifier('2001:db8:1234:56ab:1:2:3:4')).toBe(first)
    expect(ipIdentifier('2001:DB8:1234:5612:abcd::9')).toBe(first)
  })

  it('gives addresses in different /56 networks different identifiers', () => {
    expect(ipIdentifier('2001:db8:1234:5700::1')).toBe('ip:2001:db8:1234:5700::/56')
    expect(ipIdentifier('2001:db8:1234:55ff::1')).toBe('ip:2001:db8:1234:5500::/56')
    expect(ipIdentifier('2001:db8:1235:5600::1')).toBe('ip:2001:db8:1235:5600::/56')
    expect(ipIdentifier('2001:db8:1234:5700::1')).not.toBe(ipIdentifier('2001:db8:1234:5600::1'))
  })

  it('gives every spelling of one address one identifier', () => {
    const expected = 'ip:2001:db8::1/128'
    for (const spelling of [
      '2001:db8::1',
      '2001:DB8::1',
      '2001:0db8:0000:0000:0000:0000:0000:0001',
      '2001:db8:0:0:0:0:0:1',
      '2001:db8::0:1',
      '2001:db8:0::1',
      '2001:db8:0:0::0:0:1',
      '[2001:db8::1]',
      '2001:db8::1%eth0',
      '[2001:db8::1%25eth0]',
      '2001:db8::0.0.0.1',
    ]) {
      expect(ipIdentifier(spelling, { ipv6Subnet: 128 }), spelling).toBe(expected)
    }
  })

  describe('formats per RFC 5952', () => {
    it.each([
      ['2001:db8:0:0:1:0:0:1', 'ip:2001:db8::1:0:0:1/128'],
      ['2001:0:0:1:0:0:0:1', 'ip:2001:0:0:1::1/128'],
      ['2001:db8:0:1:1:1:1:1', 'ip:2001:db8:0:1:1:1:1:1/128'],
      ['2001:db8:0:0:0:1:0:0', 'ip:2001:db8::1:0:0/128'],
      ['1:0:0:1:0:0:1:1', 'ip:1::1:0:0:1:1/128'],
      ['0:0:1:0:0:0:0:1', 'ip:0:0:1::1/128'],
      ['1:0:0:0:0:0:0:0', 'ip:1::/128'],
      ['0:0:0:0:0:0:0:1', 'ip:::1/128'],
      ['0:0:0:0:0:0:0:0', 'ip:::/128'],
      ['::1', 'ip:::1/128'],
      ['::', 'ip:::/128'],
      ['0:1:0:1:0:1:0:1', 'ip:0:1:0:1:0:1:0:1/128'],
      ['1:2:3:4:5:6:7:0', 'ip:1:2:3:4:5:6:7:0/128'],
      ['1:2:3:4:5:6:0:0', 'ip:1:2:3:4:5:6::/128'],
      ['0:0:3:4:5:6:7:8', 'ip:::3:4:5:6:7:8/128'],
      ['0:2:3:4:5:6:7:8', 'ip:0:2:3:4:5:6:7:8/128'],
      ['1:2:0:0:5:0:0:0', 'ip:1:2:0:0:5::/128'],
      ['2001:DB8:ABCD:EF01:0A:00B:C:000D', 'ip:2001:db8:abcd:ef01:a:b:c:d/128'],
      ['FE80::ABCD', 'ip:fe80::abcd/128'],
      ['1:2:3:4:5:6:7::', 'ip:1:2:3:4:5:6:7:0/128'],
      ['::2:3:4:5:6:7:8', 'ip:0:2:3:4:5:6:7:8/128'],
      ['1::3:4:5:6:7:8', 'ip:1:0:3:4:5:6:7:8/128'],
    ])('%s → %s', (address, expected) => {
      expect(ipIdentifier(address, { ipv6Subnet: 128 })).toBe(expected)
    })

    it('compresses the all-zero network', () => {
      expect(ipIdentifier('::')).toBe('ip:::/56')
      expect(ipIdentifier('::1')).toBe('ip:::/56')
      expect(ipIdentifier('0:0:0:0:0:0:0:0', { ipv6Subnet: 1 })).toBe('ip:::/1')
      expect(ipIdentifier('::1', { ipv6Subnet: 128 })).toBe('ip:::1/128')
    })

    it('matches the WHATWG URL serializer, which follows RFC 5952', () => {
      // A seeded generator keeps the run reproducible; zero groups are frequent so that runs,
      // ties and edge positions all occur.
      let seed = 0x5eed
      const next = (): number => {
        seed = (Math.imul(seed, 1_664_525) + 1_013_904_223) >>> 0
        return seed >>> 8
      }
      for (let round = 0; round < 2000; round++) {
        const parts: string[] = []
        for (let group = 0; group < 8; group++) {
          parts.push(next() % 3 === 0 ? (next() % 0x10000).toString(16) : '0')
        }
        if (parts.slice(0, 5).every((part) => part === '0') && parts[5] === 'ffff') continue
        const address = parts.join(':')
        const canonical = new URL(`http://[${address}]/`).hostname.slice(1, -1)
        expect(ipIdentifier(address, { ipv6Subnet: 128 }), address).toBe(`ip:${canonical}/128`)
      }
    })
  })

  it('drops a zone index', () => {
    expect(ipIdentifier('fe80::1%eth0', { ipv6Subnet: 128 })).toBe('ip:fe80::1/128')
    expect(ipIdentifier('fe80::1%1', { ipv6Subnet: 128 })).toBe('ip:fe80::1/128')
    expect(ipIdentifier('[fe80::1%eth0]', { ipv6Subnet: 128 })).toBe('ip:fe80::1/128')
    expect(ipIdentifier('fe80::1%eth0')).toBe('ip:fe80::/56')
  })

  it('strips surrounding brackets', () => {
    expect(ipIdentifier('[2001:db8::1]')).toBe('ip:2001:db8::/56')
    expect(ipIdentifier('[::1]', { ipv6Subnet: 128 })).toBe('ip:::1/128')
  })
})

describe('ipIdentifier: invalid addresses', () => {
  it.each([
    '',
    'nonsense',
    'localhost',
    'example.com',
    ':',
    ':::',
    '::::',
    ':1::',
    '::1:',
    '1::2:',
    ':1:2:3:4:5:6:7',
    '1:2:3:4:5:6:7:',
    '1:::2',
    '1::2::3',
    '1:2:3:4:5:6:7',
    '1:2:3:4:5:6:7:8:9',
    '1:2:3:4:5:6:7:8::',
    '::1:2:3:4:5:6:7:8',
    '1:2:3:4::5:6:7:8',
    '12345::',
    '2001:db8:00000::1',
    '2001:db8::g',
    '2001:db8::-1',
    '2001:db8::1/64',
    '2001:db8::1.2.3.4:5',
    '1:2:3:4:5:6:7:1.2.3.4',
    '1:2:3:4:5:6:1.2.3.4:7',
    '::1.2.3.4.5',
    ' ::1',
    '::1 ',
    '\t2001:db8::1',
    '[]',
    '[::1',
    '::1]',
    '[[::1]]',
    '[::1] ',
    'fe80::1%',
    '[fe80::1%]',
    'fe80::1%eth0 ',
    'fe80::1%eth 0',
    'fe80::1%eth0%1',
    'fe80::1%eth0]',
    'fe80::1%eth0/64',
    '%eth0',
    '[2001:db8::1]:443',
  ])('rejects %j', (address) => {
    expectArgumentError(() => ipIdentifier(address), JSON.stringify(address))
  })

  it('says what was wrong in the message', () => {
    expect(() => ipIdentifier('nonsense')).toThrow('ipIdentifier: "nonsense" is not an IPv4 or IPv6 address')
  })

  it.each([
    [undefined, 'undefined'],
    [null, 'null'],
    [42, '42'],
    [16909060n, '16909060n'],
    [{ address: '1.2.3.4' }, '{"address":"1.2.3.4"}'],
    [['1.2.3.4'], '["1.2.3.4"]'],
  ])('rejects the non-string %s', (address, shown) => {
    expectArgumentError(() => ipIdentifier(address as unknown as string), shown)
  })
})

describe('ipIdentifier: options', () => {
  it.each([
    [0, '0'],
    [-1, '-1'],
    [129, '129'],
    [56.5, '56.5'],
    [Number.NaN, 'NaN'],
    [Number.POSITIVE_INFINITY, 'Infinity'],
    ['56', '"56"'],
    [null, 'null'],
    [56n, '56n'],
  ])('rejects ipv6Subnet %s', (ipv6Subnet, shown) => {
    expectConfigError(
      () => ipIdentifier('2001:db8::1', { ipv6Subnet: ipv6Subnet as unknown as number }),
      `got ${shown}`,
    )
  })

  it('names the option and the value', () => {
    expect(() => ipIdentifier('2001:db8::1', { ipv6Subnet: 0 })).toThrow(
      'ipIdentifier: option ipv6Subnet must be an integer from 1 to 128, got 0',
    )
  })

  it('checks options before the address', () => {
    expect(() => ipIdentifier('203.0.113.7', { ipv6Subnet: 0 })).toThrow(TollgateConfigError)
    expect(() => ipIdentifier('nonsense', { ipv6Subnet: 0 })).toThrow(TollgateConfigError)
  })

  it('rejects options that are not an object', () => {
    for (const options of [null, 56, 'ipv6Subnet']) {
      expect(() => ipIdentifier('2001:db8::1', options as unknown as object)).toThrow(TollgateConfigError)
    }
  })
})

describe('userIdentifier', () => {
  it.each([
    [42, 'user:42'],
    [0, 'user:0'],
    [-0, 'user:0'],
    [-7, 'user:-7'],
    [Number.MAX_SAFE_INTEGER, 'user:9007199254740991'],
    [Number.MIN_SAFE_INTEGER, 'user:-9007199254740991'],
    [42n, 'user:42'],
    [9_007_199_254_740_993n, 'user:9007199254740993'],
    [-5n, 'user:-5'],
    ['alice', 'user:alice'],
    ['42', 'user:42'],
    ['Alice', 'user:Alice'],
    [' spaced ', 'user: spaced '],
    ['a:b{c}*?\n', 'user:a:b{c}*?\n'],
    ['ip:203.0.113.7', 'user:ip:203.0.113.7'],
    ['ユーザー😀', 'user:ユーザー😀'],
  ])('keys %o as %j', (id, expected) => {
    expect(userIdentifier(id)).toBe(expected)
  })

  it.each([
    ['', '""'],
    [1.5, '1.5'],
    [Number.NaN, 'NaN'],
    [Number.POSITIVE_INFINITY, 'Infinity'],
    [Number.NEGATIVE_INFINITY, '-Infinity'],
    [2 ** 53, '9007199254740992'],
    [undefined, 'undefined'],
    [null, 'null'],
    [true, 'true'],
    [{ id: 1 }, '{"id":1}'],
    [[1], '[1]'],
    [Symbol('id'), 'Symbol(id)'],
  ])('rejects %s', (id, shown) => {
    expectArgumentError(() => userIdentifier(id as unknown as string), shown)
  })

  it('says what was wrong in the message', () => {
    expect(() => userIdentifier('')).toThrow('userIdentifier: "" is not a user id')
  })
})
