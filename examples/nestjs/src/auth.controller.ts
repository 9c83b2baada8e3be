import { randomUUID } from 'node:crypto'
import { Body, Controller, HttpCode, Post } from '@nestjs/common'
import { byIpAndUser, RateLimit } from '@tollgate/nestjs'
import { usernameOf } from './identity.js'

@Controller()
export class AuthController {
  // The guard runs after Nest has parsed the body: the limiter reads the username from it.
  @Post('login')
  @HttpCode(200)
  @RateLimit({ rule: 'auth.createToken', identify: byIpAndUser(usernameOf) })
  login(@Body() body: unknown) {
    // A real app checks the password here; every attempt has been counted, right or wrong.
    return { token: `fake-${usernameOf({ body }) ?? 'anonymous'}-${randomUUID()}` }
  }
}
