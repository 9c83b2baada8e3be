import { getRequestListener } from '@hono/node-server'
import { describeExampleSmoke } from '@tollgate/test-support/example-smoke'
import { createApp } from '../src/app.js'
import { rules } from '../src/rules.js'

// @hono/node-server's request listener, as `serve` runs it; supertest binds it to 127.0.0.1 itself.
describeExampleSmoke('hono', { rules, open: (limiter) => getRequestListener(createApp({ limiter }).fetch) })
