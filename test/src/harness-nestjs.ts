import { type EventEmitter, once } from 'node:events'
import type { AddressInfo } from 'node:net'
import type { ArgumentsHost } from '@nestjs/common'
import * as nestCommon from '@nestjs/common'
import * as nestCore from '@nestjs/core'
import * as nestExpress from '@nestjs/platform-express'
import * as nestFastify from '@nestjs/platform-fastify'
import type { Decision } from '@tollgate/core'
import * as tollgateNestjs from '@tollgate/nestjs'
import supertest from 'supertest'
import {
  type ErrorBody,
  type HandlerBody,
  type HarnessRequest,
  type HarnessRoute,
  handlerError,
  type MakeHarness,
  statusAsked,
} from './adapter-harness.js'

/**
 * What a Nest app is made of: NestJS 11 and `@tollgate/nestjs` from this workspace by default,
 * or NestJS 10 with the packed adapter installed next to it (packages/nestjs/test/nest10).
 */
export interface NestPackages {
  common: typeof nestCommon
  core: typeof nestCore
  platformExpress: typeof nestExpress
  platformFastify: typeof nestFastify
  tollgate: typeof tollgateNestjs
}

export type NestPlatform = 'express' | 'fastify'

const NEST_11: NestPackages = {
  common: nestCommon,
  core: nestCore,
  platformExpress: nestExpress,
  platformFastify: nestFastify,
  tollgate: tollgateNestjs,
}

type HttpAdapter = ReturnType<nestCommon.INestApplication['getHttpAdapter']>

/**
 * A Nest app on `platform` whose one controller has a handler per route, each limited route with
 * `@RateLimit(options)`; `TollgateGuard` is global through `APP_GUARD` and the module names no
 * limit of its own, so a route without options is not limited. A route mounted twice also has
 * `@UseGuards(TollgateGuard)`, as an app may add by mistake. The decorators are applied as
 * TypeScript applies them, since the routes come from the test.
 */
export function makeNestHarness(platform: NestPlatform, nest: NestPackages = NEST_11): MakeHarness {
  return async ({ routes, trustProxy, errorHandler }) => {
    const { Catch, Controller, Get, HttpException, Module, Post, Req, Res, UseGuards } = nest.common
    const { APP_GUARD, NestFactory } = nest.core
    const { RateLimit, RateLimitDecision, TollgateGuard, TollgateModule } = nest.tollgate
    // The handlers and the error filter answer through the platform's adapter, once the app exists.
    let http: HttpAdapter | undefined
    const reply = (response: object, body: object, status: number) => http?.reply(response, body, status)

    class Routes {}
    routes.forEach((route, index) => {
      const name = `route${index}`
      const prototype = Routes.prototype as unknown as Record<string, unknown>
      prototype[name] = handlerFor(route, reply)
      const descriptor = Object.getOwnPropertyDescriptor(prototype, name) as PropertyDescriptor
      const decorators: MethodDecorator[] = [route.method === 'GET' ? Get(route.path) : Post(route.path)]
      if (route.rateLimit) decorators.push(RateLimit<HarnessRequest>(route.rateLimit))
      if (route.mountedTwice) decorators.push(UseGuards(TollgateGuard))
      for (const decorate of decorators) decorate(prototype, name, descriptor)
      Req()(prototype, name, 0)
      Res()(prototype, name, 1)
      RateLimitDecision()(prototype, name, 2)
    })
    Controller()(Routes)

    class AppErrors {
      catch(error: unknown, host: ArgumentsHost) {
        const { message, status = 500 } = error as { message: string; status?: number }
        const body = { error: message } satisfies ErrorBody
        reply(host.switchToHttp().getResponse(), body, error instanceof HttpException ? error.getStatus() : status)
      }
    }
    Catch()(AppErrors)

    class App {}
    Module({
      imports: [TollgateModule.forRoot({})],
      controllers: [Routes],
      providers: [{ provide: APP_GUARD, useClass: TollgateGuard }],
    })(App)

    const proxy = trustProxy === 'not-the-peer' ? '10.0.0.1' : trustProxy
    const adapter =
      platform === 'express'
        ? new nest.platformExpress.ExpressAdapter()
        : new nest.platformFastify.FastifyAdapter({ trustProxy: proxy })
    // No logger: the suite provokes errors on purpose, which Nest would print.
    const app = await NestFactory.create(App, adapter, {
      logger: false,
      abortOnError: false,
      forceCloseConnections: true,
    })
    const httpAdapter = app.getHttpAdapter()
    http = httpAdapter
    if (platform === 'express') {
      const express = httpAdapter.getInstance() as { set(setting: string, value: unknown): void }
      express.set('trust proxy', proxy)
    }
    if (errorHandler) app.useGlobalFilters(new AppErrors())
    await app.listen(0, '127.0.0.1')
    const { port } = app.getHttpServer().address() as AddressInfo
    return { request: supertest(`http://127.0.0.1:${port}`), close: () => app.close() }
  }
}

function handlerFor(
  route: HarnessRoute,
  reply: (response: object, body: object, status: number) => void,
): (request: HarnessRequest, response: object, decision: Decision | undefined) => unknown {
  if (route.throws) {
    return () => {
      throw handlerError()
    }
  }
  // Fastify's reply keeps the Node response in `raw`; Express's response is the Node response.
  if (route.hangs) {
    return async (_request, response) => once(('raw' in response ? response.raw : response) as EventEmitter, 'close')
  }
  return (request, response, decision) =>
    reply(response, { reason: decision?.reason ?? null } satisfies HandlerBody, statusAsked(request.headers))
}

export const makeNestExpressHarness = makeNestHarness('express')
export const makeNestFastifyHarness = makeNestHarness('fastify')
