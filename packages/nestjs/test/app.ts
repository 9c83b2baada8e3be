import type { AddressInfo } from 'node:net'
import type { INestApplication, Type } from '@nestjs/common'
import { NestFactory } from '@nestjs/core'
import { ExpressAdapter } from '@nestjs/platform-express'
import { FastifyAdapter } from '@nestjs/platform-fastify'
import supertest, { type Agent } from 'supertest'

export type Platform = 'express' | 'fastify'

export const PLATFORMS: readonly Platform[] = ['express', 'fastify']

export interface Served {
  app: INestApplication
  request: Agent
}

/** Nest on `platform`, without its logger (the tests provoke errors), listening on 127.0.0.1. */
export function create(module: Type, platform: Platform): Promise<INestApplication> {
  const adapter = platform === 'express' ? new ExpressAdapter() : new FastifyAdapter()
  return NestFactory.create(module, adapter, { logger: false, abortOnError: false, forceCloseConnections: true })
}

export async function serve(module: Type, platform: Platform): Promise<Served> {
  const app = await create(module, platform)
  await app.listen(0, '127.0.0.1')
  const { port } = app.getHttpServer().address() as AddressInfo
  return { app, request: supertest(`http://127.0.0.1:${port}`) }
}
