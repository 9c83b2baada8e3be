import { TollgateArgumentError } from '../support/errors.js'
import type { RefusalResponse } from './rate-limit-options.js'

/** A refusal ready to send: what every adapter writes as it is. */
export interface SerializedRefusal {
  status: number
  headers: Record<string, string>
  contentType: string
  body: string | Buffer
}

const TEXT = 'text/plain; charset=utf-8'

const describe = (value: unknown) => (typeof value === 'string' ? JSON.stringify(value) : String(value))

/**
 * The response `refusal` returned, checked and serialized: its headers over the standard ones,
 * matched by name in any case; a `Content-Type` among them sets the content type, over
 * `contentType`. What it
 * returned that cannot be sent fails the request with a `TollgateArgumentError` naming it.
 */
export function serializedRefusal(
  returned: RefusalResponse,
  standardHeaders: Record<string, string>,
): SerializedRefusal {
  if (typeof returned !== 'object' || returned === null) {
    throw new TollgateArgumentError(`option refusal must return a response object, got ${describe(returned)}`)
  }
  const { status, headers: own, contentType, body } = returned
  if (!Number.isInteger(status) || status < 200 || status > 599) {
    throw new TollgateArgumentError(
      `option refusal returned status ${describe(status)}; it must be an integer from 200 to 599`,
    )
  }
  const headers = { ...standardHeaders }
  let ownContentType: string | undefined
  if (own !== undefined) {
    if (typeof own !== 'object' || own === null) {
      throw new TollgateArgumentError(
        `option refusal returned headers ${describe(own)}; they must be an object of strings`,
      )
    }
    for (const [name, value] of Object.entries(own)) {
      if (typeof value !== 'string') {
        throw new TollgateArgumentError(
          `option refusal returned header ${name}: ${describe(value)}; values must be strings`,
        )
      }
      const lower = name.toLowerCase()
      if (lower === 'content-type') {
        ownContentType = value
        continue
      }
      for (const standard of Object.keys(headers)) if (standard.toLowerCase() === lower) delete headers[standard]
      headers[name] = value
    }
  }
  if (contentType !== undefined && typeof contentType !== 'string') {
    throw new TollgateArgumentError(`option refusal returned contentType ${describe(contentType)}; it must be a string`)
  }
  const [serialized, defaultType] = serializedBody(body)
  return { status, headers, contentType: ownContentType ?? contentType ?? defaultType, body: serialized }
}

function serializedBody(body: unknown): [string | Buffer, string] {
  if (body === undefined || typeof body === 'string') return [body ?? '', TEXT]
  if (body instanceof Uint8Array) {
    return [Buffer.from(body.buffer, body.byteOffset, body.byteLength), 'application/octet-stream']
  }
  const json: unknown = JSON.stringify(body)
  if (typeof json !== 'string') {
    throw new TollgateArgumentError(`option refusal returned a body JSON cannot represent: ${describe(body)}`)
  }
  return [json, 'application/json']
}
