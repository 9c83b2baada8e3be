import { randomUUID } from 'node:crypto'
import type { IncomingHttpHeaders } from 'node:http'
import {
  type CanActivate,
  Controller,
  type ExecutionContext,
  Get,
  HttpCode,
  Injectable,
  Module,
  Post,
  UseGuards,
} from '@nestjs/common'
import { APP_GUARD } from '@nestjs/core'
import {
  type ClientView,
  createLimiter,
  type Decision,
  type Limiter,
  MemoryStore,
  RedisStore,
  type Store,
} from '@tollgate/core'
import {
  RateLimit,
  RateLimitDecision,
  SkipRateLimit,
  TollgateGuard,
  TollgateModule,
  type TollgateModuleOptions,
} from '@tollgate/nestjs'
import { Redis } from 'ioredis'
import { afterEach, describe, expect, inject, it } from 'vitest'
import '@tollgate/test-support/provided-context'
import { create, PLATFORMS, type Served, serve } from './app.js'

// Time moves only when a test moves it, so no window frees up between two requests.
const now = 1_700_000_000_000
const memory = () => new MemoryStore({ clock: () => now, sweepIntervalMs: 0 })

const QUOTA_EXCEEDED = 'https://iana.org/assignments/http-problem-types#quota-exceeded'

let served: Served | undefined
const limiters: Limiter[] = []

afterEach(async () => {
  await served?.app.close()
  served = undefined
  await Promise.all(limiters.splice(0).map((limiter) => limiter.close()))
})

function limiterOf(rules: Parameters<typeof createLimiter>[0]['rules']): Limiter {
  const limiter = createLimiter({ store: memory(), rules })
  limiters.push(limiter)
  return limiter
}

describe.each(PLATFORMS)('TollgateModule on the %s platform', (platform) => {
  it('limits every guarded route by the module rule, leaves @SkipRateLimit routes alone and hands over the decision', async () => {
    @Controller()
    class ItemsController {
      @Get('items')
      list(@RateLimitDecision() decision: Decision | undefined) {
        return { remaining: decision?.windows[0]?.remaining ?? null }
      }

      @Get('health')
      @SkipRateLimit()
      health() {
        return { ok: true }
      }
    }
    @Module({
      imports: [TollgateModule.forRoot({ store: memory(), windows: [{ limit: 2, period: '1m' }] })],
      controllers: [ItemsController],
      providers: [{ provide: APP_GUARD, useClass: TollgateGuard }],
    })
    class AppModule {}
    served = await serve(AppModule, platform)
    const { request } = served

    const first = await request.get('/items')
    expect(first.status).toBe(200)
    expect(first.body).toEqual({ remaining: 1 })
    expect(first.headers['ratelimit-policy']).toBe('"2-in-1m";q=2;w=60')
    expect(first.headers.ratelimit).toBe('"2-in-1m";r=1;t=60')
    expect((await request.get('/items')).body).toEqual({ remaining: 0 })

    const refused = await request.get('/items')
    expect(refused.status).toBe(429)
    expect(refused.headers['content-type']).toMatch(/^application\/problem\+json(;|$)/)
    expect(refused.headers['retry-after']).toBe('60')
    expect(refused.body).toMatchObject({
      type: QUOTA_EXCEEDED,
      status: 429,
      'violated-policies': ['2-in-1m'],
    })

    for (let i = 0; i < 3; i++) {
      const health = await request.get('/health')
      expect(health.status).toBe(200)
      expect(health.headers.ratelimit).toBeUndefined()
    }
  })

  it("counts a controller's routes once between them under its @RateLimit, and a handler's @RateLimit wins over its controller's @SkipRateLimit", async () => {
    @Controller('reports')
    @RateLimit({ rule: 'reports', windows: [{ limit: 2, period: '1m' }] })
    class ReportsController {
      @Get('daily')
      daily() {
        return 'daily'
      }

      @Get('weekly')
      weekly() {
        return 'weekly'
      }
    }
    @Controller('open')
    @SkipRateLimit()
    class OpenController {
      @Get('free')
      free() {
        return 'free'
      }

      @Get('counted')
      @RateLimit({ rule: 'counted', windows: [{ limit: 1, period: '1m' }] })
      counted() {
        return 'counted'
      }
    }
    @Module({
      imports: [TollgateModule.forRoot({ store: memory(), windows: [{ limit: 100, period: '1m' }] })],
      controllers: [ReportsController, OpenController],
      providers: [{ provide: APP_GUARD, useClass: TollgateGuard }],
    })
    class AppModule {}
    served = await serve(AppModule, platform)
    const { request } = served

    expect((await request.get('/reports/daily')).headers.ratelimit).toBe('"reports-60s";r=1;t=60')
    expect((await request.get('/reports/weekly')).headers.ratelimit).toBe('"reports-60s";r=0;t=60')
    expect((await request.get('/reports/daily')).status).toBe(429)

    for (let i = 0; i < 3; i++) {
      const free = await request.get('/open/free')
      expect(free.status).toBe(200)
      expect(free.headers.ratelimit).toBeUndefined()
    }
    expect((await request.get('/open/counted')).headers.ratelimit).toBe('"counted-60s";r=0;t=60')
    expect((await request.get('/open/counted')).status).toBe(429)
  })

  it('with a limiter and no rule, limits only the routes with @RateLimit, by the rule each names or chooses', async () => {
    const limiter = limiterOf({
      login: { windows: [{ limit: 1, period: '1m' }] },
      api: { windows: [{ limit: 2, period: '1m' }] },
      'api.free': { windows: [{ limit: 1, period: '1m' }] },
      'api.pro': { windows: [{ limit: 3, period: '1m' }] },
    })
    const byPlan = (req: { headers: IncomingHttpHeaders }) => (req.headers['x-plan'] === 'pro' ? 'api.pro' : 'api.free')

    // In a module of their own, guarded with @UseGuards: the module is global.
    @Controller()
    @UseGuards(TollgateGuard)
    class AccountController {
      @Get('open')
      open() {
        return 'open'
      }

      @Post('login')
      @HttpCode(200)
      @RateLimit('login')
      login() {
        return 'welcome'
      }

      @Get('plan')
      @RateLimit(byPlan)
      plan() {
        return 'plan'
      }
    }
    @Controller('api')
    @UseGuards(TollgateGuard)
    @RateLimit('api')
    class ApiController {
      @Get('a')
      a() {
        return 'a'
      }

      @Get('b')
      b() {
        return 'b'
      }
    }
    @Module({ controllers: [AccountController, ApiController] })
    class FeatureModule {}
    @Module({ imports: [TollgateModule.forRoot({ limiter }), FeatureModule] })
    class AppModule {}
    served = await serve(AppModule, platform)
    const { request } = served

    for (let i = 0; i < 3; i++) {
      const open = await request.get('/open')
      expect(open.status).toBe(200)
      expect(open.headers.ratelimit).toBeUndefined()
    }
    expect((await request.post('/login')).status).toBe(200)
    expect((await request.post('/login')).status).toBe(429)
    expect((await limiter.peek('login', 'ip:127.0.0.1', { cost: 0 })).windows[0]?.remaining).toBe(0)

    for (let i = 0; i < 3; i++) expect((await request.get('/plan').set('x-plan', 'pro')).status).toBe(200)
    const pro = await request.get('/plan').set('x-plan', 'pro')
    expect(pro.status).toBe(429)
    expect(pro.body).toMatchObject({ 'violated-policies': ['api.pro-60s'] })
    expect((await request.get('/plan')).status).toBe(200)
    expect((await request.get('/plan')).status).toBe(429)

    expect((await request.get('/api/a')).status).toBe(200)
    expect((await request.get('/api/b')).status).toBe(200)
    expect((await request.get('/api/a')).status).toBe(429)

    // The limiter was given, so it stays open when the app closes.
    await served.app.close()
    served = undefined
    expect((await limiter.consume('api', 'user:after-close')).allowed).toBe(true)
  })

  it('counts for what an earlier guard put on the request, when identify reads it', async () => {
    @Injectable()
    class SessionGuard implements CanActivate {
      canActivate(context: ExecutionContext) {
        const request = context.switchToHttp().getRequest<{ headers: IncomingHttpHeaders; user?: string }>()
        const user = request.headers['x-user']
        if (typeof user === 'string') request.user = user
        return true
      }
    }
    @Controller()
    class MeController {
      @Get('me')
      me() {
        return 'me'
      }
    }
    const identify = (req: { user?: string }, client: ClientView) =>
      req.user ? `user:${req.user}` : client.ipIdentifier
    @Module({
      imports: [
        TollgateModule.forRoot({ store: memory(), rule: 'me', windows: [{ limit: 1, period: '1m' }], identify }),
      ],
      controllers: [MeController],
      // Global guards run in the order they are provided.
      providers: [
        { provide: APP_GUARD, useClass: SessionGuard },
        { provide: APP_GUARD, useClass: TollgateGuard },
      ],
    })
    class AppModule {}
    served = await serve(AppModule, platform)
    const { request } = served

    expect((await request.get('/me').set('x-user', 'alice')).status).toBe(200)
    const again = await request.get('/me').set('x-user', 'alice')
    expect(again.status).toBe(429)
    expect(again.body).toMatchObject({ 'identifier-kinds': ['user'] })
    expect((await request.get('/me').set('x-user', 'bob')).status).toBe(200)
  })
})

describe('TollgateModule.forRootAsync', () => {
  it('takes a limiter made from injected providers: a RedisStore on the Redis client of another module', async () => {
    const REDIS = 'REDIS'
    const client = new Redis(inject('redisUrl'))
    const prefix = `nestjs-module:${randomUUID()}:`
    try {
      @Module({ providers: [{ provide: REDIS, useValue: client }], exports: [REDIS] })
      class RedisModule {}
      @Controller()
      class ItemsController {
        @Get('items')
        list() {
          return 'items'
        }
      }
      @Module({
        imports: [
          TollgateModule.forRootAsync({
            imports: [RedisModule],
            inject: [REDIS],
            useFactory: async (redis: Redis): Promise<TollgateModuleOptions> => ({
              store: new RedisStore({ client: redis, prefix }),
              rules: { api: { windows: [{ limit: 2, period: '1m' }] } },
              rule: 'api',
            }),
          }),
        ],
        controllers: [ItemsController],
        providers: [{ provide: APP_GUARD, useClass: TollgateGuard }],
      })
      class AppModule {}
      served = await serve(AppModule, 'express')
      const { request } = served

      expect((await request.get('/items')).headers.ratelimit).toBe('"api-60s";r=1;t=60')
      expect((await request.get('/items')).status).toBe(200)
      expect((await request.get('/items')).status).toBe(429)
      expect(await client.keys(`${prefix}*`)).not.toEqual([])
    } finally {
      await served?.app.close()
      served = undefined
      await client.quit()
    }
  })

  it('closes the limiter it made from rules when the app closes, and one of a route with windows of its own', async () => {
    const closed: string[] = []
    const closing = (name: string): Store => {
      const store = memory()
      return Object.assign(Object.create(store) as Store, {
        close: async () => {
          closed.push(name)
          await store.close()
        },
      })
    }
    @Controller()
    class UploadsController {
      @Post('upload')
      @RateLimit({ windows: [{ limit: 1, period: '1m' }] })
      upload() {
        return 'ok'
      }
    }
    @Module({
      imports: [
        TollgateModule.forRootAsync({
          useFactory: () => ({ store: closing('module'), rules: { api: { windows: [{ limit: 1, period: '1m' }] } } }),
        }),
      ],
      controllers: [UploadsController],
      providers: [{ provide: APP_GUARD, useClass: TollgateGuard }],
    })
    class AppModule {}
    served = await serve(AppModule, 'express')

    // Named after the controller and the handler, on the module's store.
    const upload = await served.request.post('/upload')
    expect(upload.headers['ratelimit-policy']).toBe('"UploadsController.upload-60s";q=1;w=60')
    expect(closed).toEqual([])
    await served.app.close()
    served = undefined
    expect(closed).toEqual(['module'])
  })
})

describe('startup checks', () => {
  @Controller()
  class PlainController {
    @Get()
    get() {
      return 'ok'
    }
  }

  it("fails the app's start on a module option core does not know, naming it", async () => {
    @Module({
      imports: [TollgateModule.forRoot({ windows: [{ limit: 1, period: '1m' }], ttl: 60 } as TollgateModuleOptions)],
      controllers: [PlainController],
    })
    class AppModule {}
    await expect(create(AppModule, 'express')).rejects.toThrow(/unknown option 'ttl'/)
  })

  it('refuses forRootAsync options it does not take, as Nest modules written otherwise take them', () => {
    class OptionsFactory {}
    expect(() => TollgateModule.forRootAsync({ useClass: OptionsFactory } as never)).toThrow(
      "TollgateModule.forRootAsync options: unknown option 'useClass'",
    )
    expect(() => TollgateModule.forRootAsync({ inject: [] } as never)).toThrow(/option useFactory must be a function/)
  })

  it('fails the start on a bad @RateLimit, naming the controller and the handler', async () => {
    const limiter = limiterOf({ api: { windows: [{ limit: 1, period: '1m' }] } })
    @Controller()
    class BadController {
      @Get('unknown')
      @RateLimit('nope')
      unknown() {
        return 'ok'
      }
    }
    @Module({ imports: [TollgateModule.forRoot({ limiter })], controllers: [BadController] })
    class AppModule {}
    const app = await create(AppModule, 'express')
    await expect(app.init()).rejects.toThrow(
      `@RateLimit on BadController.unknown: option rule "nope" is not one of the limiter's rules: api`,
    )
    await app.close()
  })

  it('fails the start on a @RateLimit that names no rule when the module names none', async () => {
    const limiter = limiterOf({ api: { windows: [{ limit: 1, period: '1m' }] } })
    @Controller()
    class CostlyController {
      @Get('costly')
      @RateLimit({ cost: 2 })
      costly() {
        return 'ok'
      }
    }
    @Module({ imports: [TollgateModule.forRoot({ limiter })], controllers: [CostlyController] })
    class AppModule {}
    const app = await create(AppModule, 'express')
    await expect(app.init()).rejects.toThrow(/^@RateLimit on CostlyController\.costly names no rule/)
    await app.close()
  })
})

describe('TollgateGuard outside HTTP', () => {
  it('lets GraphQL, WebSocket and microservice handlers pass without looking for a limit', () => {
    // Neither the limits nor the reflector is needed to tell.
    const guard = new TollgateGuard(undefined as never, undefined as never)
    for (const type of ['rpc', 'ws', 'graphql']) {
      expect(guard.canActivate({ getType: () => type } as unknown as ExecutionContext)).toBe(true)
    }
  })
})
