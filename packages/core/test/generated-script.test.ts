import { readFileSync } from 'node:fs'
import { expect, it } from 'vitest'
import { decideScript } from '../src/scripts/generated.js'

it('ships the decide script without comments, blank lines or indentation, each lua/ line of code kept', () => {
  const lines = decideScript.lua.trimEnd().split('\n')
  expect(lines.filter((line) => line.trim() === '' || line !== line.trim() || line.startsWith('--'))).toEqual([])
  // A line of code from deep inside a library file, with a '--' inside a string nowhere cut.
  const source = readFileSync(new URL('../../../lua/lib/numbers.lua', import.meta.url), 'utf8')
  expect(source).toContain("text = string.format('%.0f', n)")
  expect(lines).toContain("text = string.format('%.0f', n)")
})
