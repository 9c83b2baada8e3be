import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { afterAll, describe, expect, it } from 'vitest'
import {
  createLimiter,
  loadRules,
  MemoryStore,
  parseDuration,
  type RulesOptions,
  TollgateConfigError,
} from '../src/index.js'

const yamlText = `
limits:
  - name: auth.createToken
    algorithm: sliding-log      # optional
    parent: auth                # optional
    config:
      - { limit: 20, period: 60 }   # period in seconds, or a duration such as '500ms'
      - { limit: 5, period: 3 }
  - name: auth
    algorithm: token-bucket
    config:
      - { limit: 1000, period: 3600 }
  - name: burst
    config:
      - { limit: 2, period: 0.5 }
      - { limit: 10, period: '10s' }
`

const expected: RulesOptions = {
  'auth.createToken': {
    algorithm: 'sliding-log',
    parent: 'auth',
    windows: [
      { limit: 20, period: '60s' },
      { limit: 5, period: '3s' },
    ],
  },
  auth: { algorithm: 'token-bucket', windows: [{ limit: 1000, period: '3600s' }] },
  burst: {
    windows: [
      { limit: 2, period: '0.5s' },
      { limit: 10, period: '10s' },
    ],
  },
}

const jsonText = JSON.stringify(
  {
    limits: [
      {
        name: 'auth.createToken',
        algorithm: 'sliding-log',
        parent: 'auth',
        config: [
          { limit: 20, period: 60 },
          { limit: 5, period: 3 },
        ],
      },
      { name: 'auth', algorithm: 'token-bucket', config: [{ limit: 1000, period: 3600 }] },
      {
        name: 'burst',
        config: [
          { limit: 2, period: 0.5 },
          { limit: 10, period: '10s' },
        ],
      },
    ],
  },
  null,
  2,
)

const directory = mkdtempSync(join(tmpdir(), 'tollgate-load-rules-'))
afterAll(() => rmSync(directory, { recursive: true, force: true }))

function writeRules(name: string, text: string): string {
  const path = join(directory, name)
  writeFileSync(path, text)
  return path
}

function loadError(source: string | URL): TollgateConfigError {
  let loaded: unknown
  try {
    loaded = loadRules(source)
  } catch (error) {
    expect(error).toBeInstanceOf(TollgateConfigError)
    expect(error).toHaveProperty('code', 'TG_CONFIG')
    return error as TollgateConfigError
  }
  throw new Error(`loadRules accepted it: ${JSON.stringify(loaded)}`)
}

function configError(rules: RulesOptions): TollgateConfigError {
  try {
    createLimiter({ rules, store: new MemoryStore({ sweepIntervalMs: 0 }), onWarning: () => {} })
  } catch (error) {
    expect(error).toBeInstanceOf(TollgateConfigError)
    return error as TollgateConfigError
  }
  throw new Error('createLimiter accepted the rules')
}

describe('loadRules reads', () => {
  it('YAML text in the documented form, periods in seconds becoming durations in seconds', () => {
    expect(loadRules(yamlText)).toEqual(expected)
  })

  it('JSON text, indented', () => {
    expect(loadRules(jsonText)).toEqual(expected)
  })

  it('JSON text on one line', () => {
    expect(loadRules(JSON.stringify(JSON.parse(jsonText)))).toEqual(expected)
  })

  it('a file path', () => {
    expect(loadRules(writeRules('rules.yaml', yamlText))).toEqual(expected)
  })

  it('a JSON file path', () => {
    expect(loadRules(writeRules('rules.json', jsonText))).toEqual(expected)
  })

  it('a file: URL', () => {
    expect(loadRules(pathToFileURL(writeRules('by-url.yaml', yamlText)))).toEqual(expected)
  })

  it.each([
    [60, 60_000],
    [0.5, 500],
    [3, 3_000],
    [0.001, 1],
    [2.01, 2_010],
    [1.001, 1_001],
    [0.1, 100],
  ])('period %d s as %d ms', (seconds, ms) => {
    const rules = loadRules(`limits:\n  - name: a\n    config:\n      - { limit: 1, period: ${seconds} }\n`)
    // A string, not a bare number: in code a number is milliseconds, and one under 1000 warns.
    expect(rules.a?.windows[0]?.period).toBe(`${seconds}s`)
    expect(parseDuration(rules.a?.windows[0]?.period)).toBe(ms)
  })

  it('keeps duration strings as they are', () => {
    const rules = loadRules(`limits:\n  - name: a\n    config:\n      - { limit: 1, period: '3s' }\n`)
    expect(rules.a?.windows[0]?.period).toBe('3s')
  })

  it('an empty list as no rules, which createLimiter then refuses', () => {
    expect(loadRules('limits: []')).toEqual({})
    expect(configError(loadRules('limits: []')).message).toContain('at least one rule')
  })
})

describe('loaded rules drive a limiter', () => {
  it('admits the seed rule 5 times in 3 s, refuses the 6th', async () => {
    let now = 1_700_000_000_000
    const limiter = createLimiter({
      rules: loadRules(yamlText),
      store: new MemoryStore({ clock: () => now, sweepIntervalMs: 0 }),
      onWarning: (message) => {
        throw new Error(`unexpected warning: ${message}`)
      },
    })
    expect(limiter.rules.get('auth.createToken')?.chain.map((rule) => rule.name)).toEqual(['auth.createToken', 'auth'])
    expect(limiter.rules.get('auth')?.algorithm).toBe('token-bucket')
    for (let i = 0; i < 5; i++) {
      const decision = await limiter.consume('auth.createToken', 'ip:203.0.113.7')
      expect(decision.allowed).toBe(true)
    }
    const refused = await limiter.consume('auth.createToken', 'ip:203.0.113.7')
    expect(refused.allowed).toBe(false)
    expect(refused.retryAfterMs).toBe(3_000)
    expect(refused.windows.filter((window) => window.failed)).toMatchObject([
      { rule: 'auth.createToken', limit: 5, periodMs: 3_000, remaining: 0 },
    ])
    now += 3_000
    expect((await limiter.consume('auth.createToken', 'ip:203.0.113.7')).allowed).toBe(true)
    await limiter.close()
  })

  it('leaves window values to createLimiter, which names the rule and window', () => {
    const rules = loadRules('limits:\n  - name: a\n    config:\n      - { limit: 0, period: 3 }\n')
    expect(configError(rules).message).toContain("rule 'a', window 0: limit must be a positive integer, got 0")
  })

  it('passes an unknown algorithm through for createLimiter to refuse', () => {
    const rules = loadRules(
      'limits:\n  - name: a\n    algorithm: leaky\n    config:\n      - { limit: 1, period: 3 }\n',
    )
    expect(rules.a?.algorithm).toBe('leaky')
    expect(configError(rules).message).toContain('rule \'a\': unknown algorithm "leaky"')
  })
})

describe('loadRules refuses', () => {
  it('a document without limits', () => {
    const message = loadError('rules:\n  - name: a\n').message
    expect(message).toContain("rules text must hold an object with a 'limits' list")
  })

  it('an item without config', () => {
    const message = loadError('limits:\n  - name: a\n    algorithm: gcra\n').message
    expect(message).toContain("rules text: limits[0] ('a'): config must be a list of { limit, period }, got undefined")
  })

  it('config that is not a list', () => {
    const message = loadError('limits:\n  - name: a\n    config: { limit: 5, period: 3 }\n').message
    expect(message).toContain(
      'limits[0] (\'a\'): config must be a list of { limit, period }, got {"limit":5,"period":3}',
    )
  })

  it('limits that are not a list', () => {
    expect(loadError('limits: { name: a }').message).toContain("must hold an object with a 'limits' list")
  })

  it('a document that is a list', () => {
    expect(loadError('- name: a\n  config: []\n').message).toContain("must hold an object with a 'limits' list")
  })

  it('an unknown key at the top of the document', () => {
    expect(loadError('limits: []\nlimts: []\n').message).toContain("rules text: unknown option 'limts'")
  })

  it('an unknown key in an item', () => {
    const message = loadError('limits:\n  - name: a\n    confg: []\n').message
    expect(message).toContain("rules text: limits[0]: unknown option 'confg'")
    expect(message).toContain("'config'")
  })

  it('an unknown key in a config window', () => {
    const message = loadError(
      'limits:\n  - name: a\n    config: [{ limit: 1, period: 3 }]\n  - name: b\n    config:\n      - { limit: 5, period: 3 }\n      - { limit: 5, period: 3, burst: 2 }\n',
    ).message
    expect(message).toContain("rules text: limits[1] ('b'), config[1]: unknown option 'burst'")
  })

  it('a config window that is not an object', () => {
    expect(loadError('limits:\n  - name: a\n    config: [5]\n').message).toContain(
      "limits[0] ('a'), config[0] must be an object { limit, period }, got 5",
    )
  })

  it.each([
    ['-1', '-1'],
    ['0', '0'],
    ['true', 'true'],
    ['~', 'null'],
    ['.nan', 'NaN'],
  ])('period %s', (period, shown) => {
    const message = loadError(`limits:\n  - name: a\n    config:\n      - { limit: 5, period: ${period} }\n`).message
    expect(message).toContain(`limits[0] ('a'), config[0]: period must be a positive number of seconds, got ${shown}`)
  })

  it('a duplicate rule name', () => {
    const message = loadError(
      'limits:\n  - name: a\n    config: [{ limit: 1, period: 3 }]\n  - name: a\n    config: [{ limit: 2, period: 3 }]\n',
    ).message
    expect(message).toContain("rules text: limits[1]: rule 'a' is defined twice")
  })

  it.each([
    ['missing', '    config: []\n', 'got undefined'],
    ['empty', "  - name: ''\n    config: []\n", 'got ""'],
    ['a number', '  - name: 5\n    config: []\n', 'got 5'],
  ])('a name that is %s', (_, item, shown) => {
    const text = item.startsWith('  -') ? `limits:\n${item}` : `limits:\n  -\n${item}`
    const message = loadError(text).message
    expect(message).toContain(`limits[0]: name must be a non-empty string, ${shown}`)
  })

  it('an item that is not an object', () => {
    expect(loadError('limits:\n  - auth\n').message).toContain('limits[0] must be an object, got "auth"')
  })

  it('invalid YAML', () => {
    const message = loadError('limits:\n  - { name: a, config: [\n').message
    expect(message).toContain('rules text is neither a rules file nor valid YAML/JSON')
  })

  it('invalid JSON', () => {
    expect(loadError('{"limits": [}').message).toContain('neither a rules file nor valid YAML/JSON')
  })

  it.each(['rules.yaml', './config/rules.yml', join(directory, 'missing.yaml')])(
    'a path-like string naming no file (%s), naming it',
    (path) => {
      const message = loadError(path).message
      expect(message).toContain(`cannot read rules file ${path}`)
      expect(message).toContain('ENOENT')
    },
  )

  it('the name of a file whose content is not rules, naming the file', () => {
    const path = writeRules('not-rules.yaml', 'hello: world\n')
    expect(loadError(path).message).toContain(`${path} must hold an object with a 'limits' list`)
  })

  // Regression: loadRules('/etc/passwd') quoted the file's first characters in its error.
  it.each([
    ['a passwd-like file', 'root:x:0:0:root:/root:/bin/bash\nsecret:x:1:1:hunter2:/home:/bin/sh\n', 'a string'],
    ['a file the parser rejects', 'root:x:0:0\nsecret: hunter2\n  bad: [\n', 'at line'],
    ['an object without limits', 'password: hunter2\n', "an object without 'limits'"],
  ])('the name of %s, without quoting what it holds', (_, content, shown) => {
    const path = writeRules(`secrets-${shown.length}.txt`, content)
    const message = loadError(path).message
    expect(message).toContain(path)
    expect(message).toContain(shown)
    expect(message).not.toContain('hunter2')
    expect(message).not.toContain('root')
  })

  it('something that is neither text nor a URL', () => {
    expect(loadError(42 as unknown as string).message).toContain(
      'loadRules takes YAML or JSON text or a file path, got 42',
    )
  })

  // Regression: a file: URL naming no file threw Node's raw ENOENT.
  it('a file: URL naming no file, with a TollgateConfigError', () => {
    const message = loadError(pathToFileURL(join(directory, 'missing.yaml'))).message
    expect(message).toContain('missing.yaml')
  })
})

describe('rule names that are object keys', () => {
  it('accepts names that shadow Object.prototype members', () => {
    const rules = loadRules(
      'limits:\n  - name: constructor\n    config: [{ limit: 1, period: 3 }]\n  - name: toString\n    config: [{ limit: 1, period: 3 }]\n',
    )
    expect(Object.keys(rules)).toEqual(['constructor', 'toString'])
  })

  // Regression: a rule named '__proto__' set the prototype of a plain {} and vanished.
  it("keeps a rule named '__proto__'", () => {
    const rules = loadRules('limits:\n  - name: __proto__\n    config: [{ limit: 1, period: 3 }]\n')
    expect(Object.keys(rules)).toEqual(['__proto__'])
  })
})
