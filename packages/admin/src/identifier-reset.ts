import { createHash, timingSafeEqual } from 'node:crypto'
import type { IncomingMessage, ServerResponse } from 'node:http'
import type { OffenderHandles } from './offender-handles.js'
import type { RulesInForce } from './rules-in-force.js'

/** A reset's body is `{"rule":…,"identifier":…}` or `{"handle":…}`: anything longer is not one. */
const MAX_BODY_BYTES = 4096
const MAX_IDENTIFIER_LENGTH = 1024

/** What a reset answers: the identifier as the page shows it, and how many of its keys held state. */
export interface ResetAnswer {
  reset: true
  rule: string
  identifier: string
  existed: number
  keyCount: number
}

/**
 * `POST reset`: forgets an identifier's state in a rule, for a caller that shows the view's token
 * as `Authorization: Bearer <token>`. A browser sends that header to another origin only after a
 * CORS preflight this handler never grants, so another site's page cannot make an operator's
 * browser reset anything. The body names the rule and the identifier, or carries the handle of a
 * top offender's row (`handles`), for an identifier the page shows masked.
 */
export async function answerReset(
  req: IncomingMessage,
  res: ServerResponse,
  token: string | undefined,
  rules: RulesInForce,
  shown: (identifier: string) => string,
  handles: { offenders: OffenderHandles; now: () => number } | undefined,
): Promise<void> {
  if (token === undefined) {
    return json(res, 403, { error: 'resets are disabled: the view was started without a token' })
  }
  if (!bearerMatches(req.headers.authorization, token)) {
    return json(res, 403, { error: "a reset needs the view's token, sent as Authorization: Bearer <token>" })
  }
  if (!/^application\/json\b/i.test(req.headers['content-type'] ?? '')) {
    return json(res, 415, { error: 'a reset is a JSON body {"rule": …, "identifier": …} or {"handle": …}' })
  }
  let body: unknown
  try {
    body = await bodyOf(req)
  } catch (error) {
    return json(res, (error as { status?: number }).status ?? 400, { error: (error as Error).message })
  }
  const fields = (body ?? {}) as { rule?: unknown; identifier?: unknown; handle?: unknown }
  let { rule, identifier } = fields
  if (fields.handle !== undefined) {
    if (rule !== undefined || identifier !== undefined || typeof fields.handle !== 'string') {
      return json(res, 400, {
        error: 'a reset by handle is {"handle": …} alone, the handle a top offender was listed with',
      })
    }
    const offender = handles?.offenders.resolve(fields.handle, handles.now())
    if (offender === undefined) {
      return json(res, 404, {
        error: 'no offender this view listed lately has this handle: reset it by rule and identifier',
      })
    }
    ;({ rule, identifier } = offender)
  }
  if (typeof rule !== 'string' || rule === '') {
    return json(res, 400, { error: 'a reset names a rule: {"rule": "api", "identifier": "ip:203.0.113.7"}' })
  }
  if (typeof identifier !== 'string' || identifier === '' || identifier.length > MAX_IDENTIFIER_LENGTH) {
    return json(res, 400, {
      error: `a reset names an identifier of 1 to ${MAX_IDENTIFIER_LENGTH} characters: {"rule": "api", "identifier": "ip:203.0.113.7"}`,
    })
  }
  // The rules may have changed since the page last read them.
  const { names } = await rules.read()
  if (!rules.has(rule)) {
    return json(res, 404, {
      error: `no rule ${JSON.stringify(rule)} is in force; the rules are ${names.map((name) => JSON.stringify(name)).join(', ') || 'none'}`,
    })
  }
  let outcome: { existed: number; keyCount: number }
  try {
    outcome = await rules.reset(rule, identifier)
  } catch (error) {
    return json(res, 502, { error: `the reset did not reach Redis: ${(error as Error).message}` })
  }
  json(res, 200, { reset: true, rule, identifier: shown(identifier), ...outcome } satisfies ResetAnswer)
}

/** Compares digests, so that the time taken says nothing about the token, its length included. */
function bearerMatches(authorization: string | undefined, token: string): boolean {
  const match = /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(authorization ?? '')
  if (!match) return false
  const digest = (text: string) => createHash('sha256').update(text, 'utf8').digest()
  return timingSafeEqual(digest(match[1] as string), digest(token))
}

/** The JSON body: already parsed by the app (Express's `express.json()`, a Fastify route's `body`), or read here. */
async function bodyOf(req: IncomingMessage): Promise<unknown> {
  const parsed = (req as { body?: unknown }).body
  if (parsed !== null && typeof parsed === 'object' && !Buffer.isBuffer(parsed)) return parsed
  const chunks: Buffer[] = []
  let length = 0
  for await (const chunk of req as AsyncIterable<Buffer>) {
    length += chunk.length
    if (length > MAX_BODY_BYTES)
      throw Object.assign(new Error(`a reset's body is at most ${MAX_BODY_BYTES} bytes`), { status: 413 })
    chunks.push(chunk)
  }
  try {
    return JSON.parse(Buffer.concat(chunks).toString('utf8'))
  } catch {
    throw new Error('the body is not JSON')
  }
}

export function json(res: ServerResponse, status: number, body: unknown): void {
  res
    .writeHead(status, { 'Content-Type': 'application/json; charset=utf-8', 'Cache-Control': 'no-store' })
    .end(`${JSON.stringify(body)}\n`)
}
