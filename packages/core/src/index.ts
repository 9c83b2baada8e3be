export type { BreakerChange, BreakerState, CircuitBreakerOptions } from './circuit-breaker.js'
export type { Clock } from './clock.js'
export type { Decision, DecisionReason, WindowState } from './decision.js'
export type { DecisionOptions, ResetOptions } from './decision-options.js'
export { MAX_IDENTIFIERS } from './decision-plan.js'
export type { Duration } from './duration.js'
export { formatDuration, parseDuration } from './duration.js'
export type { TollgateErrorCode, TollgateErrorOptions } from './errors.js'
export { describeValue, TollgateArgumentError, TollgateConfigError, TollgateError } from './errors.js'
export { byIpAndUser } from './http/by-ip-and-user.js'
export type { ObservedResponse } from './http/count-only.js'
export type { TrustProxy } from './http/forwarded-address.js'
export { forwardedClientAddress } from './http/forwarded-address.js'
export type { HeaderOptions, HeadersFormat, QuotaUnit } from './http/headers.js'
export { HEADERS_FORMATS, rateLimitHeaders } from './http/headers.js'
export { policyName } from './http/policy-name.js'
export type { ProblemDetails } from './http/problem.js'
export { quotaExceededProblem, storeUnavailableProblem } from './http/problem.js'
export type { RateLimit, RateLimitVerdict, RequestView } from './http/rate-limit.js'
export { createRateLimit, createRouteRateLimit } from './http/rate-limit.js'
export type {
  ClientView,
  RateLimitOptions,
  RefusalResponse,
  ResponseOutcome,
  StandardRefusal,
} from './http/rate-limit-options.js'
export type { IpIdentifierOptions } from './identifiers/ip.js'
export { ipIdentifier } from './identifiers/ip.js'
export { userIdentifier } from './identifiers/user.js'
export type { Limiter } from './limiter.js'
export { createLimiter } from './limiter.js'
export type { LimiterOptions } from './limiter-config.js'
export type { RulesVersion, RuleVersion } from './live-rules/history.js'
export type { LiveRulesStatus, PublishOptions } from './live-rules/live-rules.js'
export { LiveRules } from './live-rules/live-rules.js'
export type { LiveRulesOptions } from './live-rules/options.js'
export type { LiveRulesClient } from './live-rules/redis-rules.js'
export type { RuleRejection, RulesChange } from './live-rules/source.js'
export { loadRules } from './load-rules.js'
export type { DecisionCountsOptions, RuleCounts, WindowCounts } from './metrics/decision-counts.js'
export { DecisionCounts } from './metrics/decision-counts.js'
export type { DecisionObserver, StoreErrorKind } from './metrics/decision-observer.js'
export { STORE_ERROR_KINDS } from './metrics/decision-observer.js'
export type { DurationCounts } from './metrics/duration-histogram.js'
export { DEFAULT_DURATION_BUCKETS } from './metrics/duration-histogram.js'
export type { HybridStoreView, RulesListener } from './metrics/limiter-sources.js'
export { hybridStoreOf, onRulesEvents } from './metrics/limiter-sources.js'
export type { DecisionOutcome } from './metrics/outcomes.js'
export { DECISION_OUTCOMES, decisionOutcome } from './metrics/outcomes.js'
export { OTHER_RULES } from './metrics/rule-labels.js'
export type { OptionKeys, OptionsObjectCheck } from './option-objects.js'
export { checkOptionsObject, optionKeys, wholeOption } from './option-objects.js'
export type { AlgorithmName, Rule, RuleOptions, RulesOptions, WarningHandler, Window, WindowOptions } from './rules.js'
export { ALGORITHMS, MAX_CHAIN_LENGTH, MAX_WINDOWS_PER_RULE } from './rules.js'
export type { RedisScript } from './scripts/redis-scripts.js'
export { REDIS_SCRIPTS } from './scripts/redis-scripts.js'
export type { RuleShape } from './state-name.js'
export { stateNameOf } from './state-name.js'
export type { BacklogOptions } from './store-backlog.js'
export type { LimiterEvents } from './store-caller.js'
export type { StoreErrorPolicy } from './store-error-policy.js'
export { hybridInstancesKey } from './stores/hybrid-instances.js'
export type {
  HybridConsistency,
  HybridLeaseOptions,
  HybridOutageOptions,
  HybridStoreOptions,
  OutagePolicy,
} from './stores/hybrid-options.js'
export type { HybridStats, HybridStoreEvents, SyncReport } from './stores/hybrid-store.js'
export { HybridStore } from './stores/hybrid-store.js'
export type { MemoryStoreOptions } from './stores/memory-store.js'
export { MemoryStore } from './stores/memory-store.js'
export type { RedisClientLike, RedisStoreOptions } from './stores/redis-store.js'
export { RedisStore } from './stores/redis-store.js'
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
export type { FleetStats, FleetStatsClient, FleetStatsOptions } from './telemetry/fleet-stats.js'
export { shareFleetStats } from './telemetry/fleet-stats.js'
export type {
  FleetProcess,
  FleetSecond,
  FleetStatsReadClient,
  RefusedIdentifier,
  RuleSecondCounts,
} from './telemetry/fleet-stats-reader.js'
export { readFleetProcesses, readFleetSeconds, readTopRefused } from './telemetry/fleet-stats-reader.js'
export { MAX_TIMER_MS } from './timer-delay.js'
