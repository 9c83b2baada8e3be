export type { LockoutState } from './algorithms/lockout.js'
export { byIpAndUser } from './http/by-ip-and-user.js'
export type { TrustProxy } from './http/forwarded-address.js'
export { forwardedClientAddress } from './http/forwarded-address.js'
export type { HeaderOptions, HeadersFormat, QuotaUnit } from './http/headers.js'
export { HEADERS_FORMATS, rateLimitHeaders } from './http/headers.js'
export type { ObservedResponse } from './http/observed-response.js'
export { policyName } from './http/policy-name.js'
export type { ProblemDetails } from './http/problem.js'
export { quotaExceededProblem, storeUnavailableProblem } from './http/problem.js'
export type { RateLimit, RateLimitVerdict, RequestView } from './http/rate-limit.js'
export { createRateLimit } from './http/rate-limit.js'
export type {
  ClientView,
  RateLimitOptions,
  RefusalResponse,
  ResponseOutcome,
  StandardRefusal,
} from './http/rate-limit-options.js'
export { createRouteRateLimit } from './http/route-rate-limit.js'
export type { RateLimitWarningCode } from './http/warnings.js'
export type { IpIdentifierOptions } from './identifiers/ip.js'
export { ipIdentifier } from './identifiers/ip.js'
export { userIdentifier } from './identifiers/user.js'
export type { Limiter } from './limiter/limiter.js'
export { createLimiter } from './limiter/limiter.js'
export type { LimiterOptions } from './limiter/limiter-config.js'
export type { LimiterWarningCode } from './limiter/limiter-warnings.js'
export type { Reservation } from './limiter/reservation.js'
export type { WaitOptions } from './limiter/wait-options.js'
export type { RulesVersion, RuleVersion } from './live-rules/history.js'
export type { LiveRulesStatus, PublishOptions } from './live-rules/live-rules.js'
export { LiveRules } from './live-rules/live-rules.js'
export type { LiveRulesOptions } from './live-rules/options.js'
export type { LiveRulesClient } from './live-rules/redis-rules.js'
export type { RuleRejection, RulesChange } from './live-rules/source.js'
export type { DecisionCountsOptions, RuleCounts, WindowCounts } from './observe/metrics/decision-counts.js'
export { DecisionCounts } from './observe/metrics/decision-counts.js'
export type { DurationCounts } from './observe/metrics/duration-histogram.js'
export { DEFAULT_DURATION_BUCKETS } from './observe/metrics/duration-histogram.js'
export type { HybridStoreView, RulesListener } from './observe/metrics/limiter-sources.js'
export { hybridStoreOf, onRulesEvents } from './observe/metrics/limiter-sources.js'
export type { DecisionOutcome } from './observe/metrics/outcomes.js'
export { DECISION_OUTCOMES, decisionOutcome } from './observe/metrics/outcomes.js'
export { OTHER_RULES } from './observe/metrics/rule-labels.js'
export type { FleetStats, FleetStatsClient, FleetStatsOptions } from './observe/telemetry/fleet-stats.js'
export { shareFleetStats } from './observe/telemetry/fleet-stats.js'
export type {
  FleetProcess,
  FleetSecond,
  FleetStatsReadClient,
  RefusedIdentifier,
  RuleSecondCounts,
} from './observe/telemetry/fleet-stats-reader.js'
export { readFleetProcesses, readFleetSeconds, readTopRefused } from './observe/telemetry/fleet-stats-reader.js'
export type { RedisClientLike } from './redis-clients/ioredis.js'
export type { NodeRedisClientLike } from './redis-clients/node-redis.js'
export type { Decision, DecisionReason, WindowState } from './rules/decision.js'
export type { IdentifierOverride, IdentifierOverrides } from './rules/identifier-overrides.js'
export { loadRules } from './rules/load-rules.js'
export type {
  AlgorithmName,
  BlockOptions,
  OverrideOptions,
  OverridesOptions,
  Rule,
  RuleBlock,
  RuleOptions,
  RulesOptions,
  WarningHandler,
  Window,
  WindowOptions,
} from './rules/rules.js'
export { ALGORITHMS, MAX_CHAIN_LENGTH, MAX_WINDOWS_PER_RULE } from './rules/rules.js'
export type { RuleShape } from './rules/state-name.js'
export { stateNameOf } from './rules/state-name.js'
export type { StoreErrorPolicy } from './rules/store-error-policy.js'
export type { RedisScript } from './scripts/redis-scripts.js'
export { REDIS_SCRIPTS } from './scripts/redis-scripts.js'
export type { BreakerChange, BreakerState, CircuitBreakerOptions } from './store-calls/circuit-breaker.js'
export type { DecisionObserver, StoreErrorKind } from './store-calls/decision-observer.js'
export { STORE_ERROR_KINDS } from './store-calls/decision-observer.js'
export type { DecisionOptions, ResetOptions } from './store-calls/decision-options.js'
export { MAX_IDENTIFIERS } from './store-calls/decision-plan.js'
export type { BacklogOptions } from './store-calls/store-backlog.js'
export type { LimiterEvents } from './store-calls/store-caller.js'
export type { HybridStoreEvents } from './stores/hybrid/hybrid-store.js'
export { HybridStore } from './stores/hybrid/hybrid-store.js'
export { hybridInstancesKey } from './stores/hybrid/instances.js'
export type {
  HybridConsistency,
  HybridLeaseOptions,
  HybridOutageOptions,
  HybridStoreOptions,
  OutagePolicy,
} from './stores/hybrid/options.js'
export type { HybridStats, SyncReport } from './stores/hybrid/reports.js'
export type { MemoryStoreOptions } from './stores/memory/memory-store.js'
export { MemoryStore } from './stores/memory/memory-store.js'
export type { RedisStoreOptions } from './stores/redis/options.js'
export { RedisStore } from './stores/redis/redis-store.js'
export { targetsOf } from './stores/shared/decision-targets.js'
export { decodeLockoutState } from './stores/shared/lockout-text.js'
export type {
  ReplyWatch,
  Store,
  StoreOperation,
  StoreReceiver,
  StoreRequest,
  StoreResult,
  StoreTarget,
  StoreWindowResult,
} from './stores/store.js'
export type { Clock } from './support/clock.js'
export type { Duration } from './support/duration.js'
export { formatDuration, parseDuration } from './support/duration.js'
export type { TollgateErrorCode, TollgateErrorOptions } from './support/errors.js'
export { describeValue, TollgateArgumentError, TollgateConfigError, TollgateError } from './support/errors.js'
export type { OptionKeys, OptionsObjectCheck } from './support/option-objects.js'
export { checkOptionsObject, optionKeys, wholeOption } from './support/option-objects.js'
export { MAX_TIMER_MS } from './support/timer-delay.js'
