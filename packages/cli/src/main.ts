import { Command, CommanderError, Option } from 'commander'
import packageJson from '../package.json' with { type: 'json' }
import { colorsFor } from './colors.js'
import type { Run } from './command.js'
import { COMMANDS } from './commands/index.js'
import { CliError, type ExitCode } from './errors.js'
import { type Io, processIo } from './io.js'
import { Output } from './output.js'
import { maskedUrls } from './redis-url.js'
import { type GlobalOptions, Session } from './session.js'

/** Runs the program on `argv` (the arguments after `tollgate`) and resolves to its exit code. */
export async function main(argv: readonly string[], io: Io = processIo): Promise<ExitCode> {
  let exitCode: ExitCode = 0
  const program = programOf(io)
  const run: Run =
    (action) =>
    async (...commanderArgs) => {
      const command = commanderArgs[commanderArgs.length - 1] as Command
      const flags = command.optsWithGlobals()
      const options = globalOptionsOf(flags, io)
      let session: Session | undefined
      try {
        session = new Session(io, options, command.opts())
        // Commander passes the arguments as the command declares them, then its options and itself.
        const positional = commanderArgs.slice(0, -2)
        await (action as (session: Session, ...args: unknown[]) => Promise<void>)(session, ...positional)
        exitCode = session.exitCode
      } catch (error) {
        ;(session?.out ?? new Output(io, options.json)).error(error)
        exitCode = error instanceof CliError ? error.exitCode : 1
      } finally {
        await session?.close()
      }
    }
  for (const command of COMMANDS) command.register(program, run)
  try {
    await program.parseAsync([...argv], { from: 'user' })
  } catch (error) {
    // Commander printed it already: a usage error, or help and the version asked for.
    if (error instanceof CommanderError) return error.exitCode === 0 ? 0 : 2
    throw error
  }
  return exitCode
}

function programOf(io: Io): Command {
  const errors = colorsFor(io.stderr, io.env)
  return new Command('tollgate')
    .description('Inspect and reset Tollgate rate-limit state, manage live rules, and check a Redis deployment.')
    .version(packageJson.version)
    .addOption(new Option('--redis <url>', 'Redis URL (redis:// or rediss://) (default: $REDIS_URL)'))
    .addOption(new Option('--prefix <prefix>', 'key prefix the application uses').default('tg:'))
    .addOption(
      new Option(
        '--rules <file>',
        'YAML or JSON rules file: the rules when none are live, and the defaults under live ones',
      ),
    )
    .addOption(new Option('--cluster', 'the URL points to a Redis Cluster node (found by itself otherwise)'))
    .addOption(new Option('--json', 'machine-readable output: one JSON document on stdout, nothing else'))
    .configureHelp({ showGlobalOptions: true })
    .showHelpAfterError('(run with --help for usage)')
    .exitOverride()
    .configureOutput({
      writeOut: (text) => io.stdout.write(text),
      writeErr: (text) => io.stderr.write(text),
      // The parser quotes what it could not place, which may be a URL with its password.
      outputError: (text, write) => write(errors.red(maskedUrls(text))),
    })
}

function globalOptionsOf(flags: Record<string, unknown>, io: Io): GlobalOptions {
  return {
    redis: typeof flags.redis === 'string' ? flags.redis : io.env.REDIS_URL,
    redisSource: typeof flags.redis === 'string' ? '--redis' : 'REDIS_URL',
    prefix: typeof flags.prefix === 'string' ? flags.prefix : 'tg:',
    rules: typeof flags.rules === 'string' ? flags.rules : undefined,
    json: flags.json === true,
    cluster: flags.cluster === true,
  }
}
