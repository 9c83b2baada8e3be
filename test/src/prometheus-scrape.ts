/** What is scraped: a prom-client Registry. */
export interface Scraped {
  metrics(): Promise<string>
}

/** The registry's text exposition as its samples: `name{labels}` → value, comments left out. */
export async function scrape(registry: Scraped): Promise<Map<string, number>> {
  const samples = new Map<string, number>()
  for (const line of (await registry.metrics()).split('\n')) {
    if (line === '' || line.startsWith('#')) continue
    const at = line.lastIndexOf(' ')
    samples.set(line.slice(0, at), Number(line.slice(at + 1)))
  }
  return samples
}

/** The samples whose series name is `name`, by their labels as written (`rule="api",outcome="limited"`). */
export function series(samples: Map<string, number>, name: string): Map<string, number> {
  const found = new Map<string, number>()
  for (const [key, value] of samples) {
    const brace = key.indexOf('{')
    const metric = brace < 0 ? key : key.slice(0, brace)
    if (metric === name) found.set(brace < 0 ? '' : key.slice(brace + 1, -1), value)
  }
  return found
}
