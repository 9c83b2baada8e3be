import { TollgateConfigError } from '@tollgate/core'
import Fastify from 'fastify'
import { describe, expect, it } from 'vitest'
import { type TollgatePluginOptions, tollgate } from '../src/index.js'

async function registrationError(options: unknown): Promise<unknown> {
  const app = Fastify()
  app.register(tollgate, options as TollgatePluginOptions)
  const error = await app.ready().then(
    () => undefined,
    (reason: unknown) => reason,
  )
  await app.close().catch(() => undefined)
  return error
}

describe('plugin options', () => {
  it.each([
    [
      { windows: [{ limit: 1, period: '1s' }], hook: 'onSend' },
      /^option hook must be 'onRequest' or 'preHandler', got 'onSend'$/,
    ],
    [{ windows: [{ limit: 1, period: '1s' }], global: 'yes' }, /^option global must be a boolean, got 'yes'$/],
    [{ windows: [{ limit: 0, period: '1s' }] }, /^rule 'inline', window 0: limit must be a positive integer, got 0$/],
    [{ windows: [{ limit: 1, period: '1s' }], burst: 5 }, /^rate limit options: unknown option 'burst'/],
    // Regression: the known options this error lists left out the plugin's own.
    [{ windows: [{ limit: 1, period: '1s' }], burst: 5 }, /known options are .*'ignoreWarnings', 'global', 'hook'$/],
    [{}, /need a rule/],
  ])('%j rejects at registration', async (options, message) => {
    const error = await registrationError(options)
    expect(error).toBeInstanceOf(TollgateConfigError)
    expect((error as Error).message).toMatch(message)
  })
})

describe('route options', () => {
  // Regression: the known options a route's unknown-option error lists left out hook.
  it('list hook among the known ones when one is unknown', async () => {
    const app = Fastify()
    await app.register(tollgate, { windows: [{ limit: 1, period: '1s' }] })
    expect(() => app.get('/', { config: { rateLimit: { hok: 'preHandler' } as never } }, async () => null)).toThrow(
      /^route GET \/: route rate limit options: unknown option 'hok'; known options are .*'ignoreWarnings', 'hook'$/,
    )
    await app.close()
  })
})
