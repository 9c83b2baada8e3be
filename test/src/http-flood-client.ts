// Fires `<connections>` GETs at once at 127.0.0.1:<port>, each on a connection of its own, from a
// process of its own (as clients are), and prints how many got each status, as one JSON line.
import { Agent, request } from 'node:http'

const [port, connections] = process.argv.slice(2).map(Number) as [number, number]
const agent = new Agent({ keepAlive: false, maxSockets: Number.POSITIVE_INFINITY })

function get(): Promise<number | string> {
  return new Promise((resolve) => {
    const asked = request({ host: '127.0.0.1', port, path: '/', agent }, (response) => {
      response.resume()
      response.on('end', () => resolve(response.statusCode ?? 0))
    })
    asked.on('error', (error) => resolve(error.message))
    asked.end()
  })
}

const statuses = await Promise.all(Array.from({ length: connections }, get))
const counts: Record<string, number> = {}
for (const status of statuses) counts[status] = (counts[status] ?? 0) + 1
process.stdout.write(`${JSON.stringify(counts)}\n`)
agent.destroy()
