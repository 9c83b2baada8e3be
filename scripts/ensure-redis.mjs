// Makes sure the test suite has a Redis to start: REDIS_URL, or redis-server and redis-sentinel
// on PATH. On a Debian-like machine where we are root, installs Debian's packages; anywhere
// else, says what to do instead of letting every Redis test fail one by one.
import { execFileSync, spawnSync } from 'node:child_process'

const needed = ['redis-server', 'redis-sentinel', 'redis-cli']
const onPath = (command) => spawnSync('sh', ['-c', `command -v ${command}`], { stdio: 'ignore' }).status === 0
const missing = needed.filter((command) => !onPath(command))

if (process.env.REDIS_URL || missing.length === 0) process.exit(0)

const canInstall = process.getuid?.() === 0 && onPath('apt-get')
if (!canInstall) {
  console.error(
    `The tests need ${missing.join(', ')} on PATH (Debian/Ubuntu: sudo apt-get install redis-server redis-sentinel redis-tools), ` +
      'or REDIS_URL pointing at a Redis 7 server (Sentinel and Cluster tests still need the binaries), or a Docker engine for testcontainers.',
  )
  process.exit(1)
}
console.error(`Installing Debian's redis-server, redis-sentinel and redis-tools (missing: ${missing.join(', ')})`)
const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' }
execFileSync('apt-get', ['update', '-qq'], { stdio: 'inherit', env })
execFileSync('apt-get', ['install', '-y', '-qq', 'redis-server', 'redis-sentinel', 'redis-tools'], {
  stdio: 'inherit',
  env,
})
// The package starts a service on 6379; the tests spawn their own servers on free ports.
spawnSync('sh', ['-c', 'service redis-server stop || true'], { stdio: 'ignore' })
