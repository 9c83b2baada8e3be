/** The attributes data points carry beside the rule and result a decision also sets on its span. */
export const WINDOW = 'tollgate.rate_limiting.window'
export const ERROR_TYPE = 'error.type'
export const RELOAD_RESULT = 'tollgate.rules.reload.result'
/** Every data point of a limiter given `limiterName`: what tells it apart from other limiters on one MeterProvider. */
export const LIMITER_NAME = 'tollgate.limiter.name'
