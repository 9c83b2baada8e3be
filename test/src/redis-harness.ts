import { existsSync } from 'node:fs'
import { request } from 'node:http'
import { spawnRedisServer } from './redis-server.js'

export type RedisSource = 'REDIS_URL' | 'testcontainers' | 'redis-server'

export interface StartedRedis {
  url: string
  source: RedisSource
  /** Stops what startRedis started; a server named by REDIS_URL belongs to someone else and is left alone. */
  stop(): Promise<void>
}

type DockerEndpoint = { socketPath: string } | { host: string; port: number }

const DEFAULT_DOCKER_SOCKET = '/var/run/docker.sock'
const DOCKER_PING_TIMEOUT_MS = 1_000
const REDIS_IMAGE = 'redis:7-alpine'
const REDIS_CONTAINER_PORT = 6379

/**
 * Redis for the test run, from the first source that works: REDIS_URL, then a container through
 * testcontainers when a Docker engine answers, then redis-server from PATH.
 */
export async function startRedis(): Promise<StartedRedis> {
  const url = process.env.REDIS_URL
  if (url) return { url, source: 'REDIS_URL', stop: async () => {} }

  const failures: string[] = []
  const docker = findDockerEndpoint()
  if (docker === undefined) {
    failures.push(`testcontainers: DOCKER_HOST is not set and ${DEFAULT_DOCKER_SOCKET} does not exist`)
  } else if (!(await dockerAnswers(docker))) {
    failures.push(`testcontainers: no Docker engine answered GET /_ping within ${DOCKER_PING_TIMEOUT_MS} ms`)
  } else {
    try {
      return await startContainer()
    } catch (error) {
      failures.push(`testcontainers: ${messageOf(error)}`)
    }
  }

  try {
    const server = await spawnRedisServer()
    return { url: server.url, source: 'redis-server', stop: () => server.stop() }
  } catch (error) {
    failures.push(`redis-server: ${messageOf(error)}`)
  }

  throw new Error(
    [
      'No Redis for the tests. Provide one of:',
      '  - REDIS_URL pointing at a running server, e.g. REDIS_URL=redis://127.0.0.1:6379',
      `  - a running Docker engine, so that testcontainers can start ${REDIS_IMAGE}`,
      '  - redis-server on PATH (Debian: apt-get install redis-server)',
      'Tried:',
      ...failures.map((failure) => `  - ${failure}`),
    ].join('\n'),
  )
}

function findDockerEndpoint(): DockerEndpoint | undefined {
  const dockerHost = process.env.DOCKER_HOST
  if (!dockerHost) return existsSync(DEFAULT_DOCKER_SOCKET) ? { socketPath: DEFAULT_DOCKER_SOCKET } : undefined
  if (dockerHost.startsWith('unix://')) return { socketPath: dockerHost.slice('unix://'.length) }
  if (dockerHost.startsWith('tcp://')) {
    // An engine that only speaks TLS (DOCKER_TLS_VERIFY) fails this plain-HTTP ping; REDIS_URL covers that case.
    const address = new URL(dockerHost)
    return { host: address.hostname, port: Number(address.port || 2375) }
  }
  return undefined
}

function dockerAnswers(endpoint: DockerEndpoint): Promise<boolean> {
  return new Promise((resolve) => {
    const ping = request(
      { ...endpoint, method: 'GET', path: '/_ping', signal: AbortSignal.timeout(DOCKER_PING_TIMEOUT_MS) },
      (response) => {
        response.resume()
        resolve(response.statusCode === 200)
      },
    )
    ping.on('error', () => resolve(false))
    ping.end()
  })
}

async function startContainer(): Promise<StartedRedis> {
  // Imported here so that runs without Docker never load testcontainers and its dependencies.
  const { GenericContainer, Wait } = await import('testcontainers')
  const container = await new GenericContainer(REDIS_IMAGE)
    .withExposedPorts(REDIS_CONTAINER_PORT)
    .withWaitStrategy(Wait.forLogMessage('Ready to accept connections'))
    .start()
  return {
    url: `redis://${container.getHost()}:${container.getMappedPort(REDIS_CONTAINER_PORT)}`,
    source: 'testcontainers',
    stop: async () => {
      await container.stop()
    },
  }
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error)
}
