import { describeExampleSmoke } from '@tollgate/test-support/example-smoke'
import { createApp } from '../src/app.js'
import { rules } from '../src/rules.js'

// supertest takes the request listener, and binds it to 127.0.0.1 itself.
describeExampleSmoke('koa', { rules, open: (limiter) => createApp({ limiter }).callback() })
