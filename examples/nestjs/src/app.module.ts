import {
  Controller,
  type DynamicModule,
  Get,
  type MiddlewareConsumer,
  Module,
  type NestModule,
  RequestMethod,
} from '@nestjs/common'
import { APP_GUARD } from '@nestjs/core'
import type { Limiter } from '@tollgate/core'
import { SkipRateLimit, TollgateGuard, TollgateModule } from '@tollgate/nestjs'
import { AuthController } from './auth.controller.js'
import { userOrAddress } from './identity.js'
import { ItemsController } from './items.controller.js'
import { requireContentLength, UploadsController } from './uploads.controller.js'

export interface AppOptions {
  /** Made from `rules.ts`; the app never closes it. */
  limiter: Limiter
}

@Controller('health')
@SkipRateLimit()
export class HealthController {
  @Get()
  check() {
    return { ok: true }
  }
}

@Module({})
export class AppModule implements NestModule {
  static forRoot({ limiter }: AppOptions): DynamicModule {
    return {
      module: AppModule,
      // Every route counts as an API read unless its @RateLimit names another rule, or it skips.
      imports: [TollgateModule.forRoot({ limiter, rule: 'api.read', identify: userOrAddress })],
      controllers: [AuthController, ItemsController, UploadsController, HealthController],
      providers: [{ provide: APP_GUARD, useClass: TollgateGuard }],
    }
  }

  configure(consumer: MiddlewareConsumer): void {
    consumer.apply(requireContentLength).forRoutes({ path: 'upload', method: RequestMethod.POST })
  }
}
