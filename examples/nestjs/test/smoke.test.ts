import type { INestApplication } from '@nestjs/common'
import { NestFactory } from '@nestjs/core'
import { describeExampleSmoke } from '@tollgate/test-support/example-smoke'
import { AppModule } from '../src/app.module.js'
import { rules } from '../src/rules.js'

let app: INestApplication | undefined

describeExampleSmoke('nestjs', {
  rules,
  async open(limiter) {
    app = await NestFactory.create(AppModule.forRoot({ limiter }), { logger: false })
    await app.init()
    return app.getHttpServer()
  },
  async close() {
    await app?.close()
    app = undefined
  },
})
