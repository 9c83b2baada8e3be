import { execFile } from 'node:child_process'
import { existsSync, realpathSync } from 'node:fs'
import { mkdir, readdir, readFile, symlink } from 'node:fs/promises'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'

export interface PackedPackage {
  /** @example '/tmp/tollgate-packed-x1/tollgate-core-0.1.0.tgz' */
  tarball: string
  /** Every file in the tarball relative to its `package/` root, sorted. @example ['dist/index.js', 'package.json'] */
  files: string[]
}

export interface CommandOutput {
  stdout: string
  stderr: string
}

/**
 * Packs as `npm pack` does, which applies no rewriting to the manifest: what it ships is what
 * `npm publish` would. Scripts are skipped because the test run builds every package first.
 */
export async function packPackage(packageDir: string, destination: string): Promise<PackedPackage> {
  await runCommand('npm', ['pack', '--ignore-scripts', '--silent', '--pack-destination', destination], {
    cwd: packageDir,
    timeoutMs: 60_000,
  })
  const tarballs = (await readdir(destination)).filter((name) => name.endsWith('.tgz'))
  if (tarballs.length !== 1) {
    throw new Error(`npm pack should write one tarball into ${destination}, found: ${tarballs.join(', ') || 'none'}`)
  }
  const tarball = join(destination, tarballs[0]!)
  const { stdout } = await runCommand('tar', ['-tzf', tarball], { timeoutMs: 10_000 })
  const files = stdout
    .split('\n')
    .filter((line) => line !== '' && !line.endsWith('/'))
    .map((line) => line.replace(/^package\//, ''))
    .sort()
  return { tarball, files }
}

/**
 * Extracts the tarball into `<appDir>/node_modules/<name>` as an install from the registry would,
 * and links each runtime and peer dependency to the copy the workspace resolves from
 * `sourceDir`, so nothing is fetched from the network. A dependency already installed in
 * `appDir` (a packed `@tollgate/core` under a packed adapter) is kept. Returns the installed
 * package's directory.
 */
export async function installPacked(packed: PackedPackage, sourceDir: string, appDir: string): Promise<string> {
  const sourceManifest = join(sourceDir, 'package.json')
  const { name } = JSON.parse(await readFile(sourceManifest, 'utf8')) as { name: string }
  const nodeModules = join(appDir, 'node_modules')
  const installed = join(nodeModules, name)
  await mkdir(installed, { recursive: true })
  await runCommand('tar', ['-xzf', packed.tarball, '-C', installed, '--strip-components=1'], { timeoutMs: 10_000 })

  const {
    dependencies = {},
    peerDependencies = {},
    peerDependenciesMeta = {},
  } = JSON.parse(await readFile(join(installed, 'package.json'), 'utf8')) as {
    dependencies?: Record<string, string>
    peerDependencies?: Record<string, string>
    peerDependenciesMeta?: Record<string, { optional?: boolean }>
  }
  const requireFromSource = createRequire(sourceManifest)
  for (const dependency of [...Object.keys(dependencies), ...Object.keys(peerDependencies)]) {
    const link = join(nodeModules, dependency)
    if (existsSync(link)) continue
    // An optional peer the workspace package does not install itself (one client library of several) is left out, as npm leaves it.
    if (peerDependenciesMeta[dependency]?.optional && !resolvable(requireFromSource, dependency)) continue
    await mkdir(dirname(link), { recursive: true })
    await symlink(packageDirOf(requireFromSource, dependency), link, 'dir')
  }
  return installed
}

function resolvable(require: NodeJS.Require, name: string): boolean {
  return (require.resolve.paths(name) ?? []).some((base) => existsSync(join(base, name, 'package.json')))
}

/** A package's directory, also for packages whose `exports` hide `package.json` or whose entry is types only. */
function packageDirOf(require: NodeJS.Require, name: string): string {
  for (const base of require.resolve.paths(name) ?? []) {
    const dir = join(base, name)
    if (existsSync(join(dir, 'package.json'))) return realpathSync(dir)
  }
  throw new Error(`${name} cannot be found from the workspace package that depends on it`)
}

/** Fails with the command, how it ended, stdout and stderr: tsc, for one, reports errors on stdout. */
export function runCommand(
  file: string,
  args: readonly string[],
  options: { cwd?: string; timeoutMs: number },
): Promise<CommandOutput> {
  return new Promise((resolve, reject) => {
    execFile(
      file,
      args,
      { cwd: options.cwd, timeout: options.timeoutMs, encoding: 'utf8', maxBuffer: 16 * 1024 * 1024 },
      (error, stdout, stderr) => {
        if (!error) {
          resolve({ stdout, stderr })
          return
        }
        const command = [file, ...args].join(' ')
        if (error.code === 'ENOENT') {
          reject(new Error(`${command} could not start: ${file} is not on PATH`, { cause: error }))
          return
        }
        const ending = error.killed
          ? `was killed after ${options.timeoutMs} ms`
          : `exited with ${error.code ?? error.signal}`
        reject(new Error(`${command} ${ending}\n--- stdout\n${stdout}\n--- stderr\n${stderr}`, { cause: error }))
      },
    )
  })
}
