import { createHash } from 'node:crypto'
import { readFileSync } from 'node:fs'
import type { ServerResponse } from 'node:http'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

interface PageFile {
  body: Buffer
  type: string
}

const resolve = createRequire(import.meta.url).resolve
/** The page's own files, beside `src/` and `dist/` alike. */
const client = fileURLToPath(new URL('../client/', import.meta.url))

/**
 * Every file the page loads, by the path it asks for. The libraries come from this package's
 * dependencies as they were installed, so that the page works on machines without internet
 * access; nothing is built or bundled.
 */
const SOURCES: Record<string, { path: () => string; type: string }> = {
  '/': { path: () => join(client, 'index.html'), type: 'text/html; charset=utf-8' },
  '/app.js': { path: () => join(client, 'app.js'), type: 'text/javascript; charset=utf-8' },
  '/app.css': { path: () => join(client, 'app.css'), type: 'text/css; charset=utf-8' },
  '/vendor/preact.js': { path: () => resolve('preact'), type: 'text/javascript; charset=utf-8' },
  '/vendor/preact-hooks.js': { path: () => resolve('preact/hooks'), type: 'text/javascript; charset=utf-8' },
  // htm's package exports give `require` its CommonJS build; the ES module sits beside it.
  '/vendor/htm.js': { path: () => join(dirname(resolve('htm')), 'htm.mjs'), type: 'text/javascript; charset=utf-8' },
  '/vendor/uplot.js': { path: () => resolve('uplot/dist/uPlot.esm.js'), type: 'text/javascript; charset=utf-8' },
  '/vendor/uplot.css': { path: () => resolve('uplot/dist/uPlot.min.css'), type: 'text/css; charset=utf-8' },
}

const loaded = new Map<string, PageFile>()

export function isPageFile(path: string): boolean {
  return Object.hasOwn(SOURCES, path)
}

/** Serves one of the page's files, read once. */
export function sendPageFile(res: ServerResponse, path: string, headOnly: boolean): void {
  let file = loaded.get(path)
  if (file === undefined) {
    const source = SOURCES[path] as { path: () => string; type: string }
    file = { body: readFileSync(source.path()), type: source.type }
    loaded.set(path, file)
  }
  const headers: Record<string, string | number> = {
    'Content-Type': file.type,
    'Content-Length': file.body.length,
    'Cache-Control': 'no-cache',
    'X-Content-Type-Options': 'nosniff',
  }
  if (path === '/') headers['Content-Security-Policy'] = contentSecurityPolicy(file.body.toString('utf8'))
  res.writeHead(200, headers)
  res.end(headOnly ? undefined : file.body)
}

/**
 * Only the page's own files run, plus its one inline script, the import map, by its hash; it
 * talks only to where it came from, and no other site may frame it.
 */
function contentSecurityPolicy(html: string): string {
  const inline = [...html.matchAll(/<script type="importmap">([\s\S]*?)<\/script>/g)].map(
    (match) =>
      `'sha256-${createHash('sha256')
        .update(match[1] as string, 'utf8')
        .digest('base64')}'`,
  )
  return [
    "default-src 'none'",
    `script-src 'self' ${inline.join(' ')}`,
    "style-src 'self'",
    "connect-src 'self'",
    "img-src 'self' data:",
    "base-uri 'none'",
    "form-action 'none'",
    "frame-ancestors 'none'",
  ].join('; ')
}
