import { IDENTIFIER_COUNT, LIMIT_NEVER_REACHED, LIMIT_OVER, ORG_COUNT } from '../config.js'
import { labelOf, type RuleShape } from '../contenders/contender.js'
import { CONTENDERS } from '../contenders/index.js'
import { STORE_TIMEOUT_MS } from '../contenders/tollgate.js'
import { FRAMEWORKS, HTTP_LIMIT, VARIANTS, variantLabel } from '../http/variants.js'
import { wasBusy } from '../machine.js'
import { YOUNG_GENERATION_MB } from '../measures/allocation.js'
import type { DecisionScenario } from '../measures/decisions.js'
import { ISOLATED, METRICS_IN_FLIGHT, medianOf } from '../measures/metrics-cost.js'
import { BASELINE_CASE, RULE_OPTION_CASES, RULE_OPTION_STORES, ruleOptionsLabel } from '../measures/rule-options.js'
import type { BenchResults } from '../results.js'
import { max, median, min, quantile } from '../stats.js'
import { KEY_SPREAD_LABEL, SHAPE_LABEL } from '../workload.js'
import { decimal, integer, ratio, spread, table } from './format.js'
import { hybridSyncSection } from './hybrid-sync.js'
import { contenderOf, fastestIncumbent, sameScenario } from './lookup.js'
import { targetsOf } from './targets.js'

function scenariosOf(results: BenchResults, shape: RuleShape): DecisionScenario[] {
  const seen: DecisionScenario[] = []
  for (const cell of results.decisions) {
    if (cell.shape === shape && !seen.some((s) => sameScenario(s, cell)))
      seen.push({ shape, spread: cell.spread, inFlight: cell.inFlight })
  }
  return seen
}

function scenarioHead(scenario: DecisionScenario): string {
  return `${scenario.inFlight} in flight, ${KEY_SPREAD_LABEL[scenario.spread]}`
}

function machineSection(results: BenchResults): string {
  const m = results.machine
  const c = results.config
  return [
    `- **Date**: ${results.startedAt.replace('T', ' ').replace(/\.\d+Z$/, ' UTC')}, ${Math.round(results.seconds)} s`,
    `- **Command**: \`${results.command}\`${c.quick ? ' (quick: short runs, one repetition, 256 in flight only, fewer identifiers in the bytes measure)' : ''}`,
    `- **Machine**: ${m.cpus} CPUs (\`nproc\`), ${m.cpuModel}, ${m.memoryGiB} GiB, ${m.os}; 1-minute load average ${m.loadAverage.start.toFixed(2)} at the start, ${m.loadAverage.end.toFixed(2)} at the end${wasBusy(m) ? ' (**the machine was busy with other work**: absolute figures are low and noisy, ratios within one run hold better)' : ''}`,
    `- **Software**: Node ${m.node}, Redis ${m.redis} (started by the bench on 127.0.0.1, no persistence), ${Object.entries(
      m.packages,
    )
      .map(([name, version]) => `${name} ${version}`)
      .join(', ')}; Tollgate ${m.tollgate ?? 'run from the workspace source by tsx'}`,
    `- **Method**: every contender runs in the same run against the same redis-server, each library with the same ioredis client options: ioredis's defaults (\`new Redis(url)\`). In section 1 each contender decides in a process of its own per rule shape (\`src/decisions-worker.ts\`), with a client of its own, as a server holds one limiter: one process shared by all of them compiled each library's code for every use the others made of it, and Tollgate's contenders (five algorithms on four stores) share most of theirs; the other sections share one client in the bench's process. Per scenario each contender is warmed up once, then measured ${c.decisions.repetitions} time${c.decisions.repetitions === 1 ? '' : 's'} for ${c.decisions.measureMs} ms in an order rotated each repetition, Redis flushed before each measurement; tables give the median, and ±, where shown, is half the min–max range over the median. Tollgate is given \`storeTimeoutMs: ${STORE_TIMEOUT_MS}\` so that a slow answer is measured as slow rather than replaced by a fail-open decision; its per-decision timer is armed all the same.`,
  ].join('\n')
}

function targetsSection(results: BenchResults): string {
  const rows = targetsOf(results).map((row) => [
    row.met ? '**met**' : '**missed**',
    row.target,
    row.measured,
    row.met ? ratio(row.ratio) : `${ratio(row.ratio)} (${Math.round((1 - row.ratio) * 100)}% short)`,
  ])
  if (rows.length === 0) return ''
  return `## Targets\n\nEach target is a ratio within this run; the last column is measured ÷ required for the worst case (≥ ×1.00 is met).\n\n${table(['', 'target', 'measured', 'worst ratio'], rows)}`
}

function decisionsSection(results: BenchResults): string {
  if (results.decisions.length === 0) return ''
  const parts = ['## 1. Decisions per second at the library API']
  parts.push(
    `Each decision is the library's own call (below), with a limit of ${integer(1e9)} per minute so that nothing is refused, except in the column *one hot key over its limit*, where the limit is ${integer(LIMIT_OVER)} per minute and nearly every decision refuses (a client hammering a key it is refused on; Redis is flushed before each measurement, so its first ${integer(LIMIT_OVER)} are admitted). "In flight" is how many callers each await their decision before making the next. 10,000 identifiers cycle through \`ip:10.0.x.y\` (for 2 × 2 with \`user:<n>\` alongside); one hot key sends every decision to the same identifier. The ratio is to the fastest incumbent on the same store in the same scenario (for the 2 × 2 rule: the fastest incumbent's 1-window figure, since no incumbent can express that rule in one call).`,
  )
  for (const shape of ['one-window', 'two-by-two'] as const) {
    const scenarios = scenariosOf(results, shape)
    if (scenarios.length === 0) continue
    const ids = [...new Set(results.decisions.filter((c) => c.shape === shape).map((c) => c.contender))]
    const rows = ids.map((id) => {
      const contender = contenderOf(id)
      return [
        `${contender.role === 'tollgate' ? '**' : ''}${labelOf(contender)}${contender.role === 'tollgate' ? '**' : ''}`,
        ...scenarios.map((scenario) => {
          const cell = results.decisions.find((c) => c.contender === id && sameScenario(c, scenario))
          if (!cell) return '–'
          const rate = median(cell.perSecond)
          const best =
            contender.role === 'ceiling' ? undefined : fastestIncumbent(results.decisions, contender.store, scenario)
          const versus = best ? ` ${ratio(rate / median(best.perSecond))}` : ''
          const failures = cell.errors > 0 ? ` (${integer(cell.errors)} errors)` : ''
          return `${integer(rate)}${versus} ${spread(cell.perSecond, rate)}${failures}`.trim()
        }),
      ]
    })
    parts.push(
      `### ${SHAPE_LABEL[shape]}\n\n${table(['contender', ...scenarios.map(scenarioHead)], rows, ['l', ...scenarios.map(() => 'r' as const)])}`,
    )
  }
  const busiest = results.decisions.filter(
    (c) => c.spread === 'many' && c.inFlight === Math.max(...results.config.decisions.inFlight),
  )
  if (busiest.length > 0) {
    const rows = busiest.map((cell) => [
      labelOf(contenderOf(cell.contender)),
      SHAPE_LABEL[cell.shape],
      decimal(median(cell.clientCpuUs), 1),
      contenderOf(cell.contender).store === 'redis' ? decimal(median(cell.redisCpuUs), 1) : '–',
    ])
    parts.push(
      `### CPU per decision, ${Math.max(...results.config.decisions.inFlight)} in flight, 10,000 identifiers\n\nThe bench process (the library and ioredis) and the Redis server, in µs of CPU per decision. On ${results.machine.cpus} cores shared by both, the sum bounds the rate.\n\n${table(['contender', 'rule', 'client µs', 'Redis µs'], rows, ['l', 'l', 'r', 'r'])}`,
    )
  }
  parts.push(
    `### What each number calls\n\n${CONTENDERS.map((c) => `- **${labelOf(c)}**: ${c.call}`).join('\n')}\n- **express-rate-limit, @fastify/rate-limit, koa-ratelimit** have no library API of their own; the calls above are what their middleware does once per request, made the same way. They are measured as middleware in section 3.`,
  )
  return parts.join('\n\n')
}

function latencySection(results: BenchResults): string {
  if (results.latency.length === 0) return ''
  const c = results.config.latency
  const floor = median(results.latency.flatMap((cell) => cell.timerP50Us))
  const rows = results.latency.map((cell) => {
    const contender = contenderOf(cell.contender)
    const p50 = median(cell.p50Us)
    const p99 = median(cell.p99Us)
    return [
      contender.role === 'tollgate' ? `**${labelOf(contender)}**` : labelOf(contender),
      `${decimal(p50)} ${spread(cell.p50Us, p50)}`.trim(),
      `${decimal(p99)} ${spread(cell.p99Us, p99)}`.trim(),
      cell.errors > 0 ? integer(cell.errors) : '0',
    ]
  })
  return [
    '## 6. Latency of one in-process decision',
    `Each memory contender's own call (section 1), 1 window × 1 identifier over 10,000 identifiers, made and awaited one at a time: ${integer(c.decisions)} decisions timed with \`process.hrtime.bigint()\` from the call to the code after its \`await\`, ${c.repetitions} repetition${c.repetitions === 1 ? '' : 's'} in a rotated order after a warm-up of ${integer(c.warmupDecisions)}; medians over the repetitions. Every sample includes the timer and one turn of the microtask queue: an awaited call that does nothing measures ${decimal(floor)} µs at p50 here.`,
    table(['contender', 'p50 µs', 'p99 µs', 'errors'], rows, ['l', 'r', 'r', 'r']),
  ].join('\n\n')
}

function allocationSection(results: BenchResults): string {
  if (results.allocation.length === 0) return ''
  const c = results.config.allocation
  const rows = results.allocation.map((cell) => {
    const contender = contenderOf(cell.contender)
    const own = median(cell.bytes) - median(cell.nothingBytes)
    return [
      contender.role === 'tollgate' ? `**${labelOf(contender)}**` : labelOf(contender),
      integer(median(cell.bytes)),
      integer(own),
    ]
  })
  return [
    '## 9. Heap bytes one in-process decision allocates',
    `Each memory contender's own call (section 1), 1 window × 1 identifier over 10,000 identifiers that all hold their state already, awaited one at a time, in a process of its own started with \`--expose-gc\` and a young generation of ${YOUNG_GENERATION_MB} MB: each of ${c.rounds} rounds collects, then makes ${integer(c.perRound)} decisions with no collection among them, and the heap's growth over the round, per decision, is what a decision allocated (the median over the rounds). The same for an awaited call that does nothing is the await's own share, taken off in the last column. Unlike time, these bytes do not move with the machine's load: the same code allocates the same bytes in every run, so they show a change that allocates less where a timing cannot tell it from noise.`,
    table(['contender', 'bytes per decision', 'less the await'], rows, ['l', 'r', 'r']),
  ].join('\n\n')
}

function metricsSection(results: BenchResults): string {
  if (results.metrics.length === 0) return ''
  const c = results.config.metrics
  const rows = results.metrics.map((cell) => {
    const own = cell.processes.map((process) => process.ownNs)
    return [
      `${cell.rules} rule${cell.rules === 1 ? '' : 's'}`,
      `\`${cell.variant}\``,
      integer(medianOf(cell, 'detachedNs')),
      integer(medianOf(cell, 'emptyNs')),
      integer(medianOf(cell, 'metricsNs')),
      decimal(medianOf(cell, 'callNs'), 1),
      `**${decimal(medianOf(cell, 'ownNs'), 1)}**`,
      `${decimal(min(own), 1)} to ${decimal(max(own), 1)}`,
      decimal(medianOf(cell, 'attachNs'), 1),
      decimal(medianOf(cell, 'isolatedNs'), 1),
      cell.errors > 0 ? integer(cell.errors) : '0',
    ]
  })
  return [
    '## 8. What metrics cost a decision',
    `Per row, one in-process limiter (MemoryStore, fixed window, 1 window × 1 identifier over 10,000 identifiers, ${METRICS_IN_FLIGHT} in flight) with \`prometheusMetrics\` (one decision in 100 timed) or \`openTelemetryMetrics\` (on the global no-op MeterProvider, span attributes on, no active span), in each of ${c.processes} processes of its own (run in rounds of every row), decides in turns of ${integer(c.perTurn)} decisions: with no observer, with an observer that does nothing, and with the metrics' observer, in rounds of one turn each whose first rotates, ${integer(c.rounds)} rounds after ${integer(c.warmupRounds)} to warm up. Each turn starts with a minor collection, so that no turn pays for the garbage of the one before. With 8 rules, decisions take the rules in turn, so that each finds its rule's counts anew. A figure of a process is the median over its rounds (of a turn's wall ns per decision, or of the difference between two of a round's turns); a row's is the median of its processes'. Differences are only taken within a process: processes compile the same code their own ways, several ns apart. The metrics' own cost is their turn less the empty observer's (the target; the lowest and highest process beside it); the empty observer's turn less the one with none is the limiter's call to any observer, and the metrics' turn less the one with none is what attaching them costs in all. The column before the errors times the observer alone: ${integer(ISOLATED.decisions)} real decisions of the limiter handed to it ${integer(ISOLATED.passes)} times over in a loop (one in \`timeEvery\` with the two clock reads a timed decision costs), less the same loop handing them to an observer that does nothing; the lowest of ${ISOLATED.rounds} rounds, the median over the processes.`,
    table(
      [
        'rules',
        'metrics',
        'ns per decision, no observer',
        'empty observer',
        'metrics',
        'call to an observer, ns',
        "metrics' own cost, ns per decision",
        "processes' own cost",
        'attaching, ns',
        'observer alone, ns',
        'errors',
      ],
      rows,
      ['l', 'l', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'r'],
    ),
  ].join('\n\n')
}

function commandsSection(results: BenchResults): string {
  if (results.commands.length === 0 && results.redisBenchmark.length === 0) return ''
  const parts = ['## 2. Redis commands and round trips per decision']
  if (results.commands.length > 0) {
    parts.push(
      `One decision in flight over 10,000 identifiers, ${integer(results.commands[0]?.decisions ?? 0)} decisions after a warm-up that loads the scripts. *Client commands* are calls of ioredis's \`sendCommand\`; *round trips* are writes on the socket (with one decision in flight, each write waits for its answer); *Redis commands* is the INFO commandstats delta, which counts the commands a script runs as well as the EVALSHA itself; *Redis µs* is the time Redis spent executing the EVALSHA (script and its commands), from the same delta.`,
    )
    const rows = results.commands.map((cell) => [
      labelOf(contenderOf(cell.contender)),
      SHAPE_LABEL[cell.shape],
      decimal(cell.clientCommands),
      decimal(cell.roundTrips),
      integer(cell.bytesOut),
      integer(cell.bytesIn),
      decimal(cell.serverCommands),
      decimal(cell.redisUs, 1),
      Object.entries(cell.byCommand)
        .sort((a, b) => b[1] - a[1])
        .map(([name, count]) => `${name} ${decimal(count)}`)
        .join(', '),
    ])
    parts.push(
      table(
        [
          'contender',
          'rule',
          'client commands',
          'round trips',
          'bytes sent',
          'bytes received',
          'Redis commands',
          'Redis µs',
          'by command',
        ],
        rows,
        ['l', 'l', 'r', 'r', 'r', 'r', 'r', 'r', 'l'],
      ),
    )
  }
  if (results.redisBenchmark.length > 0) {
    parts.push(
      `The physical limit of one Redis core for the ceiling's script, from redis-benchmark (a C client) on the same server:\n\n${table(
        ['pipeline', 'EVALSHA/s', 'p99 ms', 'command'],
        results.redisBenchmark.map((cell) => [
          String(cell.pipeline),
          integer(cell.perSecond),
          decimal(cell.p99Ms),
          `\`${cell.command}\``,
        ]),
        ['r', 'r', 'r', 'l'],
      )}`,
    )
  }
  return parts.join('\n\n')
}

function httpSection(results: BenchResults): string {
  if (results.http.length === 0) return ''
  const c = results.config.http
  const parts = [
    '## 3. HTTP',
    `\`GET /\` answering \`ok\`, every request through the limiter under test with a limit of ${integer(HTTP_LIMIT)} per minute keyed by client IP (one hot key: autocannon connects from 127.0.0.1), so nothing is refused. Each server is a process of its own, as is autocannon (${c.connections} connections, ${c.seconds} s per run, ${c.repetitions} repetition${c.repetitions === 1 ? '' : 's'} after a ${c.warmupSeconds} s warm-up); with ${results.machine.cpus} cores the server, autocannon and Redis compete for CPU, so the no-limiter baseline is partly autocannon's own limit. Tollgate runs a fixed window, as the incumbents and the ceiling do, with its default headers (draft-10), so that the ratios compare what each limiter adds; one more row runs its default algorithm, the exact sliding log, whose log for the one hot key holds every request of the last minute. The row *no limiter, Tollgate's two headers set* decides nothing: it sets the two headers Tollgate sends here, with the values it sends, the way its adapter sets them, so its ratio is the most any limiter answering with them could reach. The incumbents run their defaults. The ratio is to no limiter on the same framework; server µs is the server process's CPU per request.`,
  ]
  for (const framework of FRAMEWORKS) {
    const cells = results.http.filter((cell) => cell.framework === framework)
    if (cells.length === 0) continue
    const none = median(cells.find((cell) => cell.variant === 'none')?.perSecond ?? [])
    const rows = VARIANTS.flatMap((variant) => {
      const cell = cells.find((c) => c.variant === variant)
      if (!cell) return []
      const rate = median(cell.perSecond)
      return [
        [
          variant.startsWith('tollgate') ? `**${variantLabel(framework, variant)}**` : variantLabel(framework, variant),
          `${integer(rate)} ${spread(cell.perSecond, rate)}`.trim(),
          ratio(rate / none),
          decimal(median(cell.p99Ms), 0),
          decimal(median(cell.serverCpuUs), 1),
          cell.non2xx + cell.errors > 0 ? `${integer(cell.non2xx)} non-2xx, ${integer(cell.errors)} errors` : '0',
        ],
      ]
    })
    parts.push(
      `### ${framework}\n\n${table(['limiter', 'req/s', '× no limiter', 'p99 ms', 'server µs/req', 'failures'], rows, ['l', 'r', 'r', 'r', 'r', 'r'])}`,
    )
  }
  return parts.join('\n\n')
}

function bytesSection(results: BenchResults): string {
  if (results.bytes.length === 0) return ''
  const runs = results.config.bytes.runs
  const hits = runs.map((run) => run.hits)
  const ids = [...new Set(results.bytes.map((cell) => cell.contender))]
  const rows = ids.map((id) => {
    const at = (h: number) => results.bytes.find((cell) => cell.contender === id && cell.hits === h)
    return [
      labelOf(contenderOf(id)),
      decimal(at(hits[0] as number)?.keysPerIdentifier ?? Number.NaN, 2),
      ...hits.flatMap((h) => [
        integer(at(h)?.memoryUsagePerKey ?? Number.NaN),
        integer(at(h)?.usedMemoryPerIdentifier ?? Number.NaN),
      ]),
    ]
  })
  return [
    '## 4. Redis bytes per identifier',
    `A rule of 100 per minute; ${runs.map((run) => `${integer(run.identifiers)} identifiers hit ${run.hits} time${run.hits === 1 ? '' : 's'} each`).join(', and ')}, all admitted (50 hits on 10,000 identifiers would take minutes at Tollgate's Redis rate). *MEMORY USAGE* is \`MEMORY USAGE key SAMPLES 0\` averaged over up to 200 keys (the key's name, value, TTL and allocator overhead); *used_memory* is the server's \`used_memory\` growth divided by the identifiers (adds the keyspace and expiry dictionaries). Each library keeps its default key prefix.`,
    table(
      [
        'contender',
        'keys per identifier',
        ...hits.flatMap((h) => [
          `MEMORY USAGE, ${h} hit${h === 1 ? '' : 's'}`,
          `used_memory, ${h} hit${h === 1 ? '' : 's'}`,
        ]),
      ],
      rows,
      ['l', 'r', ...hits.flatMap(() => ['r', 'r'] as const)],
    ),
  ].join('\n\n')
}

function exactnessSection(results: BenchResults): string {
  if (results.exactness.length === 0) return ''
  const { processes, perProcess, limit } = results.config.exactness
  const rows = results.exactness.map((cell) => [
    labelOf(contenderOf(cell.contender)),
    integer(cell.attempts),
    integer(cell.admitted),
    integer(cell.failed),
    cell.admitted === limit && cell.failed === 0
      ? 'exact'
      : cell.admitted > limit
        ? `**over by ${integer(cell.admitted - limit)}**`
        : `under by ${integer(limit - cell.admitted)}`,
  ])
  return [
    '## 5. Exactness',
    `${processes} processes, each with its own ioredis client, fire ${integer(perProcess)} concurrent decisions each on one identifier whose limit is ${integer(limit)} per hour. Memory stores are left out: each process counts on its own.`,
    table(['contender', 'attempts', 'admitted', 'failed', ''], rows, ['l', 'r', 'r', 'r', 'l']),
  ].join('\n\n')
}

function liveRulesSection(results: BenchResults): string {
  if (results.liveRules.length === 0) return ''
  const parts = ['## 7. Live rules']
  const propagation = results.liveRules.filter((cell) => cell.kind === 'propagation')
  if (propagation.length > 0) {
    const first = propagation[0] as (typeof propagation)[number]
    parts.push(
      `${first.processes} child processes, each with its own ioredis client, LiveRules (\`pollIntervalMs: ${integer(first.pollIntervalMs)}\`) and limiter, follow one prefix; the bench publishes a limit change, waits until every process has applied it, and times each from the \`publish()\` call to the process's \`rules\` event (the wall clock, read in each process). From the call, a nudged process applies a change after three round trips and a Pub/Sub delivery: the publisher's read of the epoch, its publish script, the nudge, and the process's read of what changed. With nudges, a process hears the publish on Pub/Sub; with nudges off it finds it at its next poll, and publishes are spread at random over the poll interval.`,
      table(
        ['', 'publishes', 'samples', 'p50 ms', 'p99 ms', 'max ms', 'PING round trip ms'],
        propagation.map((cell) => [
          cell.mode === 'nudge' ? 'nudge' : 'polling only',
          integer(cell.publishes),
          integer(cell.propagationMs.length),
          decimal(quantile(cell.propagationMs, 0.5)),
          decimal(quantile(cell.propagationMs, 0.99)),
          decimal(Math.max(...cell.propagationMs)),
          decimal(cell.roundTripMs ?? Number.NaN, 3),
        ]),
        ['l', 'r', 'r', 'r', 'r', 'r', 'r'],
      ),
    )
  }
  for (const cell of results.liveRules) {
    if (cell.kind !== 'decision-commands') continue
    const total = Object.values(cell.byCommand).reduce((sum, calls) => sum + calls, 0)
    const listed = Object.entries(cell.byCommand)
      .map(([name, calls]) => `${name} ${integer(calls)}`)
      .join(', ')
    parts.push(
      `Redis commands while a limiter on live rules and a MemoryStore decided ${integer(cell.decisions)} times in ${decimal(cell.seconds, 1)} s (256 callers; INFO commandstats delta): ${integer(total)}${listed ? ` (${listed})` : ''}, ${decimal(total / cell.decisions, 6)} per decision. Decisions send none; what there is, is the poll's GET of the epoch, once per ${integer(cell.pollIntervalMs)} ms.`,
    )
  }
  return parts.join('\n\n')
}

function ruleOptionsSection(results: BenchResults): string {
  if (results.ruleOptions.length === 0) return ''
  const c = results.config.ruleOptions
  const parts = [
    '## 11. What `by` and `block` add to a decision',
    `Per store, one limiter per case below (the RedisStore on the run's ioredis client), every rule a fixed window of ${integer(LIMIT_NEVER_REACHED)} per minute, so that nothing is refused. Each decision is \`limiter.consume(rule, ['user:<n>', 'org:<m>'])\`, cycling through ${integer(IDENTIFIER_COUNT)} users in ${integer(ORG_COUNT)} orgs (user n in org n mod ${integer(ORG_COUNT)}), ${integer(c.inFlight)} in flight. Each case is warmed up once for ${integer(c.warmupMs)} ms, then measured ${c.repetitions} time${c.repetitions === 1 ? '' : 's'} for ${integer(c.measureMs)} ms in an order rotated each repetition, Redis flushed before each measurement; tables give the median. *Targets* are the rule × identifier pairs one decision checks and charges, counted in a decision's windows. The cases:`,
    [
      '- **one rule, 2 identifiers**: rule `r`, no `by`, charged on the user and on the org: the baseline of the ratio column.',
      '- **3-level chain without by**: `user`, parent `org`, parent `global`, none with `by`, so every level is charged on both identifiers. What a hierarchy costs without `by`, and not a hierarchy: `org` also counts each user on its own, and `global` is one count per user and per org rather than one for everyone.',
      "- **3-level hierarchy with by**: `user` by `['user']`, parent `org` by `['org']`, parent `global` by `[]`: each level charged on its own kind of identifier, `global` on the one key (`*`) every decision shares.",
      "- **one rule with block, 2 identifiers**: the first case with `block: { for: '15m' }`, never started since nothing is refused: each decision also reads the block key beside each target's state key (on RedisStore in the same script call), and that read is what the case adds.",
    ].join('\n'),
    "The ratio is to the first case on the same store in the same run. *Client µs* is this process's CPU (the limiter and ioredis) per decision, *Redis µs* the server's (`INFO cpu`, user and system, over the measurement) per decision.",
  ]
  for (const store of RULE_OPTION_STORES) {
    const cells = RULE_OPTION_CASES.flatMap((name) =>
      results.ruleOptions.filter((cell) => cell.store === store && cell.case === name),
    )
    if (cells.length === 0) continue
    const baseline = median(cells.find((cell) => cell.case === BASELINE_CASE)?.perSecond ?? [])
    const rows = cells.map((cell) => {
      const rate = median(cell.perSecond)
      return [
        ruleOptionsLabel(cell.case),
        integer(cell.targets),
        `${integer(rate)} ${spread(cell.perSecond, rate)}`.trim(),
        ratio(rate / baseline),
        decimal(median(cell.clientCpuUs), 1),
        ...(store === 'redis' ? [decimal(median(cell.redisCpuUs), 1)] : []),
        cell.errors > 0 ? integer(cell.errors) : '0',
      ]
    })
    parts.push(
      `### ${store === 'redis' ? 'RedisStore' : 'MemoryStore'}\n\n${table(
        [
          'case',
          'targets',
          'decisions/s',
          '× one rule',
          'client µs',
          ...(store === 'redis' ? ['Redis µs'] : []),
          'errors',
        ],
        rows,
        ['l', 'r', 'r', 'r', 'r', ...(store === 'redis' ? (['r'] as const) : []), 'r'],
      )}`,
    )
  }
  return parts.join('\n\n')
}

export function markdownOf(results: BenchResults, charts: readonly string[]): string {
  const sections = [
    `# Benchmarks: Tollgate and the incumbents, side by side in one run`,
    machineSection(results),
    targetsSection(results),
    decisionsSection(results),
    commandsSection(results),
    httpSection(results),
    bytesSection(results),
    exactnessSection(results),
    latencySection(results),
    liveRulesSection(results),
    metricsSection(results),
    allocationSection(results),
    hybridSyncSection(results),
    ruleOptionsSection(results),
    charts.length > 0 ? `## Charts\n\n${charts.map((file) => `![${file}](${file})`).join('\n')}` : '',
  ]
  return `${sections.filter((s) => s !== '').join('\n\n')}\n`
}
