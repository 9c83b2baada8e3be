import { defineConfig } from 'tsup'

export default defineConfig({
  entry: ['src/index.ts'],
  format: ['esm', 'cjs'],
  // The bundler drops the entry's reference to the augmentation; scripts/ship-augmentation.mjs
  // puts the file beside the declarations once they are built.
  dts: { banner: '/// <reference path="./augmentation.d.ts" />' },
  sourcemap: false,
  clean: true,
  target: 'node20',
})
