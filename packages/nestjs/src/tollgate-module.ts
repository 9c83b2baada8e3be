import { type DynamicModule, Module, type Provider } from '@nestjs/common'
import { DiscoveryModule } from '@nestjs/core'
import { checkOptionsObject, describeValue, optionKeys, TollgateConfigError } from '@tollgate/core'
import {
  type NestRequest,
  TOLLGATE_OPTIONS,
  type TollgateModuleAsyncOptions,
  type TollgateModuleOptions,
} from './options.js'
import { RouteLimits } from './route-limits.js'

/**
 * The rate limit of an app: its options, once, in the root module. Global, so that
 * `TollgateGuard` works in every module, through `APP_GUARD` or `@UseGuards`.
 * @example imports: [TollgateModule.forRoot({ limiter, rule: 'api' })]
 */
@Module({})
// biome-ignore lint/complexity/noStaticOnlyClass: a Nest module is a class; forRoot and forRootAsync are how Nest modules take options
export class TollgateModule {
  /**
   * The module with these options, checked as the app starts: a bad one fails it with `TollgateConfigError`.
   * @example TollgateModule.forRoot({ limiter, rule: 'api', identify: byIpAndUser((req: Request) => req.user?.id) })
   */
  static forRoot<Req = NestRequest>(options: TollgateModuleOptions<Req>): DynamicModule {
    // A factory rather than a value: Nest tells dynamic modules apart by a hash of their
    // providers, and a limiter holding a Redis client is a large graph to hash.
    return moduleWith({ provide: TOLLGATE_OPTIONS, useFactory: () => options })
  }

  /**
   * The module with options made by a factory, from other providers (configuration, a Redis client).
   * @example TollgateModule.forRootAsync({ imports: [ConfigModule], inject: [ConfigService], useFactory: (config: ConfigService) => ({ limiter: limiterFor(config), rule: 'api' }) })
   */
  static forRootAsync<Req = NestRequest>(options: TollgateModuleAsyncOptions<Req>): DynamicModule {
    checkOptionsObject(options as unknown, ASYNC_OPTION_KEYS, 'TollgateModule.forRootAsync options', {
      shape: '{ imports, inject, useFactory }',
    })
    const { imports = [], useFactory, inject = [] } = options
    if (typeof useFactory !== 'function') {
      throw new TollgateConfigError(
        `TollgateModule.forRootAsync option useFactory must be a function returning the module's options, got ${describeValue(useFactory)}`,
      )
    }
    return moduleWith({ provide: TOLLGATE_OPTIONS, useFactory, inject }, imports)
  }
}

const ASYNC_OPTION_KEYS = optionKeys<TollgateModuleAsyncOptions>({ imports: true, useFactory: true, inject: true })

function moduleWith(options: Provider, imports: NonNullable<DynamicModule['imports']> = []): DynamicModule {
  return {
    module: TollgateModule,
    global: true,
    imports: [...imports, DiscoveryModule],
    providers: [options, RouteLimits],
    exports: [RouteLimits],
  }
}
