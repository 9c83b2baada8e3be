import { defineConfig } from 'tsup'

export default defineConfig({
  entry: ['src/index.ts'],
  format: ['esm', 'cjs'],
  // Members marked @internal (a store's one-pass decision for the limiter) stay out of the declarations.
  dts: { compilerOptions: { stripInternal: true } },
  sourcemap: false,
  clean: true,
  target: 'node20',
})
