import { readFile } from 'node:fs/promises'

interface ProfileNode {
  id: number
  callFrame: { functionName: string; url: string }
  children?: number[]
}

interface CpuProfile {
  startTime: number
  nodes: ProfileNode[]
  samples: number[]
  timeDeltas: number[]
}

export interface Cost {
  name: string
  /** Share of the samples, idle excluded. */
  share: number
}

function where(url: string): string {
  if (url === '') return ''
  const path = url.replace(/^file:\/\//, '')
  const bundle = /\/tollgate-build\/(\w+)\.mjs$/.exec(path)
  if (bundle) return `@tollgate/${bundle[1]} (bundle)`
  const pnpm = /node_modules\/\.pnpm\/[^/]+\/node_modules\/((?:@[^/]+\/)?[^/]+)\/(.*)$/.exec(path)
  if (pnpm) return `${pnpm[1]}/${pnpm[2]}`
  const workspace = /\/(packages\/[^/]+\/src\/.*|bench\/src\/.*)$/.exec(path)
  if (workspace) return workspace[1] as string
  return path.startsWith('node:') ? path : path.split('/').slice(-2).join('/')
}

/** Where a function lives, coarsely: Tollgate's core, ioredis, Node's own JS, V8 (GC, compiler), or the bench. */
function area(url: string, functionName: string): string {
  if (functionName === '(garbage collector)') return 'garbage collection'
  if (functionName === '(program)') return 'V8 and native code outside JS'
  if (url.includes('/packages/core/') || url.includes('/tollgate-build/')) return '@tollgate/*'
  if (url.includes('/ioredis/')) return 'ioredis'
  if (url.includes('node_modules')) return where(url).split('/')[0] ?? 'other packages'
  if (url.startsWith('node:')) return 'Node.js internals (net, streams, timers, promises)'
  if (url.includes('/bench/src/')) return 'the bench loop'
  if (url === '') return 'native / builtins'
  return 'other'
}

/**
 * Self time by function and by area, from a V8 `.cpuprofile`, idle time left out; only samples
 * between `fromUs` and `toUs` (the profile's clock, process.hrtime in µs) when given.
 */
export async function summarizeProfile(
  file: string,
  window: { fromUs?: number; toUs?: number } = {},
  top = 15,
): Promise<{ functions: Cost[]; areas: Cost[] }> {
  const profile = JSON.parse(await readFile(file, 'utf8')) as CpuProfile
  const byId = new Map(profile.nodes.map((node) => [node.id, node]))
  const self = new Map<number, number>()
  let at = profile.startTime
  profile.samples.forEach((id, i) => {
    const delta = profile.timeDeltas[i] ?? 0
    at += delta
    if (at < (window.fromUs ?? -Infinity) || at > (window.toUs ?? Infinity)) return
    self.set(id, (self.get(id) ?? 0) + delta)
  })
  const functions = new Map<string, number>()
  const areas = new Map<string, number>()
  let total = 0
  for (const [id, time] of self) {
    const frame = (byId.get(id) as ProfileNode).callFrame
    if (frame.functionName === '(idle)') continue
    total += time
    // Line numbers are left out: files that tsx transpiled report line 1 for everything.
    const name = `${frame.functionName || '(anonymous)'} ${where(frame.url)}`.trim()
    functions.set(name, (functions.get(name) ?? 0) + time)
    const group = area(frame.url, frame.functionName)
    areas.set(group, (areas.get(group) ?? 0) + time)
  }
  const ranked = (map: Map<string, number>) =>
    [...map].sort((a, b) => b[1] - a[1]).map(([name, time]) => ({ name, share: time / total }))
  return { functions: ranked(functions).slice(0, top), areas: ranked(areas) }
}
