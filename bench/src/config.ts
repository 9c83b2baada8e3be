/** How long and how often each measure runs: a full run takes about ten minutes, `--quick` about one. */
export interface BenchConfig {
  quick: boolean
  decisions: {
    /** Once per contender and scenario, before its first repetition. */
    warmupMs: number
    measureMs: number
    repetitions: number
    inFlight: readonly number[]
  }
  commands: { warmupDecisions: number; decisions: number }
  /** Decisions timed one at a time, per contender and repetition. */
  latency: { warmupDecisions: number; decisions: number; repetitions: number }
  /**
   * Per worker process, rounds of three turns of `perTurn` decisions: no observer, one that does
   * nothing, the metrics'; `processes` workers per variant and rule count.
   */
  metrics: { processes: number; warmupRounds: number; rounds: number; perTurn: number }
  /** Decisions per round of the allocation measure, its rounds, and the decisions before them. */
  allocation: { perRound: number; rounds: number; warmupDecisions: number }
  http: {
    connections: number
    /** Once per server, before the repetitions. */
    warmupSeconds: number
    seconds: number
    repetitions: number
  }
  /** Identifiers per number of hits: 50 hits on 10,000 identifiers would take minutes at Tollgate's rate on Redis. */
  bytes: { runs: ReadonlyArray<{ hits: number; identifiers: number }> }
  exactness: { processes: number; perProcess: number; limit: number }
  redisBenchmark: { requests: number; pipeline: number; clients: number }
  /** As `decisions`, for each case of a rule's options on each store, at one concurrency. */
  ruleOptions: { warmupMs: number; measureMs: number; repetitions: number; inFlight: number }
  /** Processes following live rules, publishes timed with nudges and with polling alone, seconds of decisions counted. */
  liveRules: {
    processes: number
    pollIntervalMs: number
    nudgePublishes: number
    pollPublishes: number
    commandSeconds: number
  }
}

export function configOf(quick: boolean): BenchConfig {
  return {
    quick,
    decisions: {
      warmupMs: quick ? 60 : 300,
      measureMs: quick ? 120 : 500,
      repetitions: quick ? 1 : 3,
      // A quick look keeps the concurrency the targets are set at.
      inFlight: quick ? [256] : [1, 256],
    },
    commands: { warmupDecisions: 200, decisions: quick ? 500 : 2_000 },
    latency: { warmupDecisions: 20_000, decisions: quick ? 20_000 : 100_000, repetitions: quick ? 1 : 3 },
    // A difference of a few ns in several hundred: many short turns, each seeing the same machine
    // as the next, in many processes, each of which compiles the limiter its own way: processes of
    // one run spread over 20 ns, and the median of 9 of them moved by 8 ns between runs of the
    // same code (bench/README.md).
    metrics: { processes: quick ? 3 : 24, warmupRounds: quick ? 100 : 150, rounds: quick ? 150 : 300, perTurn: 2_000 },
    // Allocation does not vary from run to run: a quick run measures it as a full one does.
    allocation: { perRound: 10_000, rounds: 5, warmupDecisions: 50_000 },
    // Express takes about two seconds of load to reach its pace.
    http: { connections: 64, warmupSeconds: quick ? 1 : 3, seconds: quick ? 1 : 2.5, repetitions: quick ? 1 : 3 },
    bytes: {
      runs: quick
        ? [
            { hits: 1, identifiers: 1_000 },
            { hits: 50, identifiers: 200 },
          ]
        : [
            { hits: 1, identifiers: 10_000 },
            { hits: 50, identifiers: 2_000 },
          ],
    },
    exactness: { processes: 4, perProcess: 1_000, limit: 1_000 },
    redisBenchmark: { requests: quick ? 50_000 : 200_000, pipeline: 16, clients: 50 },
    // The cases differ by tens of percent, less than one repetition's drift on a shared machine:
    // more repetitions than section 1 so that the ratio of their medians holds.
    ruleOptions: {
      warmupMs: quick ? 60 : 300,
      measureMs: quick ? 120 : 500,
      repetitions: quick ? 1 : 5,
      inFlight: 256,
    },
    liveRules: {
      processes: 4,
      pollIntervalMs: 1_000,
      nudgePublishes: quick ? 25 : 100,
      pollPublishes: quick ? 8 : 30,
      commandSeconds: quick ? 2.5 : 5,
    },
  }
}

export const LIMIT_NEVER_REACHED = 1_000_000_000
/** The hot key's limit over a period in the over-limit scenario: reached within the first turns of a measurement. */
export const LIMIT_OVER = 100
export const PERIOD_MS = 60_000
export const IDENTIFIER_COUNT = 10_000
/** The orgs the users of the rule-options measure belong to, user n to org n mod ORG_COUNT. */
export const ORG_COUNT = 100
