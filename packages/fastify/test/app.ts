import { MemoryStore } from '@tollgate/core'
import Fastify, { type FastifyInstance, type FastifyServerOptions } from 'fastify'
import { onTestFinished } from 'vitest'
import { type TollgatePluginOptions, tollgate } from '../src/index.js'

export const NOW = 1_700_000_000_000

/** A store whose time stands still, so header values are exact however slow the machine. */
export function fixedClockStore(): MemoryStore {
  return new MemoryStore({ clock: () => NOW, sweepIntervalMs: 0 })
}

/** A Fastify app with the plugin registered (awaited, so routes added next see it), closed after the test. */
export async function appWith(
  options: TollgatePluginOptions,
  fastifyOptions: FastifyServerOptions = {},
): Promise<FastifyInstance> {
  const app = Fastify(fastifyOptions)
  onTestFinished(() => app.close())
  await app.register(tollgate, { store: fixedClockStore(), ...options })
  return app
}
