import { once } from 'node:events'
import { type AdminServerOptions, startAdminServer } from '@tollgate/admin'
import { loadRules } from '@tollgate/core'
import type { CommandModule } from '../command.js'
import { durationOption } from '../duration-option.js'
import { usageError } from '../errors.js'
import type { Session } from '../session.js'

/** `tollgate admin --json`: printed once the view listens. */
export interface AdminResult {
  url: string
  readOnly: boolean
  showIdentifiers: boolean
}

export const admin: CommandModule = {
  register(program, run) {
    program
      .command('admin')
      .description("serve the live web view of the fleet's stats until Ctrl-C (127.0.0.1 by default)")
      .requiredOption('--port <port>', 'the port to listen on; 0: any free port')
      .option('--host <address>', 'the address to listen on', '127.0.0.1')
      .option('--token <token>', 'allows resets with this bearer token (or TOLLGATE_ADMIN_TOKEN); read-only without')
      .option('--show-identifiers', 'shows identifiers whole instead of masked')
      .option('--flush-interval <duration>', "the fleet's shareFleetStats flushIntervalMs", '1s')
      .option('--top-interval <duration>', "the fleet's shareFleetStats topIntervalMs", '10s')
      .action(
        run(async (session: Session) => {
          const options = session.commandOptions<{
            port?: string
            host?: string
            token?: string
            showIdentifiers?: boolean
            flushInterval?: string
            topInterval?: string
          }>()
          const port = Number(options.port)
          if (!Number.isSafeInteger(port) || port < 0 || port > 65_535) {
            throw usageError(`--port must be a port number from 0 to 65535, got ${options.port}`)
          }
          const token = options.token ?? session.io.env.TOLLGATE_ADMIN_TOKEN
          const note = (text: string) => session.out.note(text)
          const { client } = await session.redis()
          const serverOptions: AdminServerOptions = {
            client,
            port,
            host: options.host ?? '127.0.0.1',
            prefix: session.options.prefix,
            showIdentifiers: options.showIdentifiers === true,
            flushIntervalMs: durationOption('--flush-interval', options.flushInterval ?? '1s', note),
            topIntervalMs: durationOption('--top-interval', options.topInterval ?? '10s', note),
            ...(token === undefined || token === '' ? {} : { token }),
            ...(session.options.rules === undefined ? {} : { rules: loadRules(session.options.rules) }),
          }
          const server = await startAdminServer(serverOptions)
          session.out.result<AdminResult>(
            {
              url: server.url,
              readOnly: serverOptions.token === undefined,
              showIdentifiers: serverOptions.showIdentifiers === true,
            },
            (result) =>
              `admin view on ${result.url} (${result.readOnly ? 'read-only: --token allows resets' : 'resets need the token'}${result.showIdentifiers ? ', identifiers shown' : ''}); Ctrl-C stops it`,
          )
          await Promise.race([once(process, 'SIGINT'), once(process, 'SIGTERM')])
          await server.close()
        }),
      )
  },
}
