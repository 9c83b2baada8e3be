import { execFile } from 'node:child_process'
import { existsSync } from 'node:fs'
import { mkdir, readdir, readFile, symlink } from 'node:fs/promises'
import { createRequire } from 'node:module'
import { basename, dirname, extname, join } from 'node:path'

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
 * Packs the way `pnpm publish` would: pnpm applies `publishConfig` (exports pointing at dist)
 * and rewrites `workspace:` ranges, which `npm pack` does not.
 */
export async function packPackage(packageDir: string, destination: string): Promise<PackedPackage> {
  const pnpm = findPnpm()
  await runCommand(pnpm.file, [...pnpm.args, 'pack', '--pack-destination', destination], {
    cwd: packageDir,
    timeoutMs: 60_000,
  })
  const tarballs = (await readdir(destination)).filter((name) => name.endsWith('.tgz'))
  if (tarballs.length !== 1) {
    throw new Error(`pnpm pack should write one tarball into ${destination}, found: ${tarballs.join(', ') || 'none'}`)
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
 * and links each runtime dependency to the copy the workspace resolves from `sourceDir`, so
 * nothing is fetched from the network; a dependency already installed (from its own tarball) is
 * kept. Returns the installed package's directory.
 */
export async function installPacked(packed: PackedPackage, sourceDir: string, appDir: string): Promise<string> {
  const sourceManifest = join(sourceDir, 'package.json')
  const { name } = JSON.parse(await readFile(sourceManifest, 'utf8')) as { name: string }
  const nodeModules = join(appDir, 'node_modules')
  const installed = join(nodeModules, name)
  await mkdir(installed, { recursive: true })
  await runCommand('tar', ['-xzf', packed.tarball, '-C', installed, '--strip-components=1'], { timeoutMs: 10_000 })

  const { dependencies = {} } = JSON.parse(await readFile(join(installed, 'package.json'), 'utf8')) as {
    dependencies?: Record<string, string>
  }
  const requireFromSource = createRequire(sourceManifest)
  for (const dependency of Object.keys(dependencies)) {
    const link = join(nodeModules, dependency)
    if (existsSync(link)) continue
    await mkdir(dirname(link), { recursive: true })
    await symlink(dirname(requireFromSource.resolve(`${dependency}/package.json`)), link, 'dir')
  }
  return installed
}

/**
 * The pnpm running this process when there is one, since `npx -y pnpm@10 test` leaves no pnpm on
 * PATH; else `pnpm` from PATH. `pnpm run` and `pnpm test` set npm_execpath; `pnpm exec` does not.
 */
export function findPnpm(env: NodeJS.ProcessEnv = process.env): { file: string; args: string[] } {
  const execPath = env.npm_execpath
  if (execPath && basename(execPath, extname(execPath)) === 'pnpm') {
    // pnpm.cjs from npm or corepack runs on node; @pnpm/exe is a native executable.
    return /\.[cm]?js$/.test(execPath) ? { file: process.execPath, args: [execPath] } : { file: execPath, args: [] }
  }
  return { file: 'pnpm', args: [] }
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
