import { defineConfig } from 'tsup'

export default defineConfig({
  entry: ['src/bin.ts'],
  format: ['esm'],
  sourcemap: false,
  clean: true,
  target: 'node20',
})
