import type { IncomingMessage, ServerResponse } from 'node:http'
import { readSnapshot } from './fleet-snapshot.js'
import { identifierMask } from './identifier-mask.js'
import { answerReset, json } from './identifier-reset.js'
import { LiveStream } from './live-stream.js'
import { OffenderHandles } from './offender-handles.js'
import { type AdminConfig, type AdminOptions, adminConfigOf } from './options.js'
import { isPageFile, sendPageFile } from './page-files.js'
import { RulesInForce } from './rules-in-force.js'

/** A Node request handler, as Express's `app.use` and `http.createServer` take it. */
export interface AdminHandler {
  (req: IncomingMessage, res: ServerResponse, next?: (error?: unknown) => void): void
  /** Ends the open event streams and stops reading Redis; the client stays open. */
  close(): Promise<void>
}

/**
 * The admin view as a request handler: the page, its event stream (`events`) and its reset
 * endpoint (`reset`), under whatever path the app mounts it. Paths it does not serve go to `next`
 * when there is one, else answer 404.
 * @example
 * app.use('/tollgate', adminHandler({ client: redis, rules: loadRules('limits.yaml') }))
 */
export function adminHandler(options: AdminOptions): AdminHandler {
  return handlerOf(adminConfigOf(options, 'adminHandler'))
}

/** The handler of options already checked (`startAdminServer` checks its own). */
export function handlerOf(config: AdminConfig): AdminHandler {
  const shown = config.showIdentifiers ? (identifier: string) => identifier : identifierMask()
  const rules = new RulesInForce(config)
  // Only a view that allows resets hands out handles to reset by.
  const offenders = config.token === undefined ? undefined : new OffenderHandles(config.intervalMs)
  const stream = new LiveStream({
    read: () => readSnapshot(config, rules, shown, offenders),
    intervalMs: config.intervalMs,
    maxStreams: config.maxStreams,
    maxBufferedBytes: config.maxBufferedBytes,
    staleAfterMs: config.staleAfterMs,
  })

  const handle = (req: IncomingMessage, res: ServerResponse, next?: (error?: unknown) => void): void => {
    const path = withinBase(pathOf(req.url), config.basePath)
    if (path === undefined) {
      notServed(res, next)
    } else if (path === '' || (path === '/' && !requestedPath(req).endsWith('/'))) {
      // The page asks for its files relatively: it must be at a path that ends with '/'. The
      // redirect is relative, and starts with './', so that no path can make it point elsewhere.
      const asked = requestedPath(req)
      res.writeHead(308, { Location: `./${asked.slice(asked.lastIndexOf('/') + 1)}/` }).end()
    } else if (isPageFile(path)) {
      if (allows(req, res, 'GET', 'HEAD')) sendPageFile(res, path, req.method === 'HEAD')
    } else if (path === '/events') {
      if (allows(req, res, 'GET')) stream.open(req, res)
    } else if (path === '/reset') {
      if (allows(req, res, 'POST')) {
        const handles = offenders && { offenders, now: config.now }
        answerReset(req, res, config.token, rules, shown, handles).catch((error: unknown) => {
          if (!res.headersSent) json(res, 500, { error: (error as Error).message })
          else res.destroy()
        })
      }
    } else {
      notServed(res, next)
    }
  }
  return Object.assign(handle, {
    async close() {
      stream.close()
      await rules.close()
    },
  })
}

/** The path below the base, or undefined when the request is not under it. Express strips the mount path itself. */
function withinBase(pathname: string, basePath: string): string | undefined {
  if (basePath === '') return pathname
  if (pathname === basePath) return ''
  return pathname.startsWith(`${basePath}/`) ? pathname.slice(basePath.length) : undefined
}

/** The path as the client asked for it: Express keeps it in `originalUrl` when it strips its mount path from `url`. */
function requestedPath(req: IncomingMessage): string {
  return pathOf((req as { originalUrl?: string }).originalUrl ?? req.url)
}

/** The path of a request target, as it came: `new URL` would read `//host/x` as another host. */
function pathOf(target = '/'): string {
  const end = target.search(/[?#]/)
  return end < 0 ? target : target.slice(0, end)
}

function notServed(res: ServerResponse, next?: (error?: unknown) => void): void {
  if (next) next()
  else res.writeHead(404, { 'Content-Type': 'text/plain; charset=utf-8' }).end('not found\n')
}

function allows(req: IncomingMessage, res: ServerResponse, ...methods: string[]): boolean {
  if (methods.includes(req.method ?? 'GET')) return true
  res
    .writeHead(405, { Allow: methods.join(', '), 'Content-Type': 'text/plain; charset=utf-8' })
    .end('method not allowed\n')
  return false
}
