// After tsup, whose declaration build clears every .d.ts in dist first: the Fastify augmentation
// ships as one file that dist/index.d.ts and dist/index.d.cts both reference (see
// src/augmentation.d.ts), since the bundler would leave it out, or copy it into each.
import { copyFileSync } from 'node:fs'

copyFileSync(
  new URL('../src/augmentation.d.ts', import.meta.url),
  new URL('../dist/augmentation.d.ts', import.meta.url),
)
