import { fileURLToPath } from 'node:url'
import { defineConfig } from 'vitest/config'

// Tests run the workspace packages from source; their manifests point at the built dist, as
// installed copies do (the packed-package tests check those).
const source = (name: string) => fileURLToPath(new URL(`./packages/${name}/src/index.ts`, import.meta.url))

export default defineConfig({
  resolve: {
    alias: ['core', 'express', 'fastify', 'koa', 'hono', 'nestjs', 'prometheus', 'opentelemetry', 'admin'].map(
      (name) => ({
        find: new RegExp(`^@tollgate/${name}$`),
        replacement: source(name),
      }),
    ),
  },
  test: {
    include: ['packages/*/test/**/*.test.ts', 'test/tests/**/*.test.ts', 'examples/*/test/**/*.test.ts'],
    globalSetup: ['test/global-setup.ts'],
    pool: 'forks',
    testTimeout: 30_000,
    hookTimeout: 60_000,
  },
})
