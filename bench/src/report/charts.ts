import * as vega from 'vega'
import { compile, type TopLevelSpec } from 'vega-lite'
import { labelOf } from '../contenders/contender.js'
import { CONTENDERS } from '../contenders/index.js'
import { FRAMEWORKS, VARIANTS, variantLabel } from '../http/variants.js'
import type { BenchResults } from '../results.js'
import { max, median, min } from '../stats.js'
import { KEY_SPREAD_LABEL, SHAPE_LABEL } from '../workload.js'
import { contenderOf } from './lookup.js'

export interface Chart {
  file: string
  svg: string
}

const ROLE_COLORS = { domain: ['Tollgate', 'incumbent', 'ceiling'], range: ['#d6604d', '#4393c3', '#878787'] }

function roleName(role: string): string {
  return role === 'tollgate' ? 'Tollgate' : role
}

export async function render(spec: TopLevelSpec): Promise<string> {
  // vega-lite warns about sort orders it resolves itself; the charts are checked by eye instead.
  const quiet = vega.logger(vega.None)
  const view = new vega.View(vega.parse(compile(spec, { logger: quiet }).spec), { renderer: 'none', logger: quiet })
  try {
    return await view.toSVG()
  } finally {
    view.finalize()
  }
}

/** The contender's name without its store, which the chart's columns show. */
/** A y axis of contender names, ordered by their `rank`, long names shown whole. */
function rankedLabels(field: string) {
  return { field, type: 'nominal', title: null, sort: { field: 'rank', op: 'min' }, axis: { labelLimit: 400 } } as const
}

function shortLabel(id: string, twoByTwo: boolean): string {
  const contender = contenderOf(id)
  const name =
    contender.role === 'tollgate'
      ? `Tollgate ${contender.variant.replace(/ \(.*\)$/, '')}`
      : contender.role === 'ceiling'
        ? 'raw EVALSHA ceiling'
        : contender.library
  return twoByTwo ? `${name} — 2×2` : name
}

function decisionsChart(results: BenchResults): TopLevelSpec | undefined {
  if (results.decisions.length === 0) return undefined
  const order = new Map<string, number>()
  const values = results.decisions.map((cell) => {
    const contender = contenderOf(cell.contender)
    const label = shortLabel(cell.contender, cell.shape === 'two-by-two')
    const rank =
      (contender.role === 'tollgate' ? 0 : contender.role === 'incumbent' ? 2000 : 3000) +
      (cell.shape === 'two-by-two' ? 1000 : 0) +
      CONTENDERS.indexOf(contender)
    order.set(label, rank)
    return {
      contender: label,
      rank,
      store: contender.store === 'redis' ? 'Redis' : 'memory',
      scenario: `${cell.inFlight} in flight, ${KEY_SPREAD_LABEL[cell.spread]}`,
      role: roleName(contender.role),
      median: median(cell.perSecond),
      low: min(cell.perSecond),
      high: max(cell.perSecond),
    }
  })
  const y = rankedLabels('contender')
  return {
    $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
    title: {
      text: 'Decisions per second at the library API',
      subtitle: `median, and min–max of the repetitions; "2×2" is Tollgate's ${SHAPE_LABEL['two-by-two']} rule`,
    },
    data: { values },
    facet: {
      row: {
        field: 'scenario',
        type: 'nominal',
        title: null,
        header: { labelAngle: 0, labelAlign: 'left', labelFontWeight: 'bold' },
      },
      column: {
        field: 'store',
        type: 'nominal',
        title: null,
        sort: ['Redis', 'memory'],
        header: { labelFontWeight: 'bold' },
      },
    },
    resolve: { scale: { x: 'independent', y: 'independent' } },
    spec: {
      width: 300,
      layer: [
        {
          mark: 'bar',
          encoding: {
            y,
            x: { field: 'median', type: 'quantitative', title: 'decisions/s' },
            color: { field: 'role', type: 'nominal', scale: ROLE_COLORS, title: null },
          },
        },
        {
          mark: { type: 'rule', color: 'black' },
          encoding: { y, x: { field: 'low', type: 'quantitative' }, x2: { field: 'high' } },
        },
      ],
    },
  }
}

function commandsChart(results: BenchResults): TopLevelSpec | undefined {
  if (results.commands.length === 0) return undefined
  const labelOf = (cell: (typeof results.commands)[number]) => shortLabel(cell.contender, cell.shape === 'two-by-two')
  const commands = results.commands.flatMap((cell) =>
    Object.entries(cell.byCommand).map(([command, perDecision]) => ({
      contender: labelOf(cell),
      command,
      perDecision,
    })),
  )
  const time = results.commands.map((cell) => ({ contender: labelOf(cell), redisUs: cell.redisUs }))
  const oneTrip = results.commands.every((cell) => Math.abs(cell.roundTrips - 1) < 0.005)
  // Both panels list contenders in the order of Redis time, most expensive first.
  const order = [...time].sort((a, b) => b.redisUs - a.redisUs).map((row) => row.contender)
  const y = { field: 'contender', type: 'nominal', title: null, sort: order, axis: { labelLimit: 400 } } as const
  return {
    $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
    title: {
      text: 'What Redis does per decision',
      subtitle: `INFO commandstats delta, one decision in flight; ${
        oneTrip ? 'every contender makes exactly one round trip' : 'round trips differ: see the table'
      }`,
    },
    hconcat: [
      {
        data: { values: commands },
        width: 300,
        mark: 'bar',
        encoding: {
          y,
          x: { aggregate: 'sum', field: 'perDecision', type: 'quantitative', title: 'commands (scripts’ included)' },
          color: { field: 'command', type: 'nominal', title: 'command', scale: { scheme: 'tableau20' } },
          order: { field: 'perDecision', sort: 'descending' },
        },
      },
      {
        data: { values: time },
        width: 200,
        mark: { type: 'bar', color: '#6a6a6a' },
        encoding: {
          y: { ...y, axis: null },
          x: { field: 'redisUs', type: 'quantitative', title: 'µs Redis spends' },
        },
      },
    ],
  }
}

function httpChart(results: BenchResults): TopLevelSpec | undefined {
  if (results.http.length === 0) return undefined
  const values = results.http.map((cell) => {
    const none = median(
      results.http.find((c) => c.framework === cell.framework && c.variant === 'none')?.perSecond ?? [],
    )
    const rate = median(cell.perSecond)
    return {
      framework: cell.framework,
      limiter: variantLabel(cell.framework, cell.variant),
      rank: VARIANTS.indexOf(cell.variant),
      kind:
        cell.variant === 'none' || cell.variant === 'headers-only'
          ? 'no limiter'
          : cell.variant.startsWith('tollgate')
            ? 'Tollgate'
            : cell.variant === 'ceiling'
              ? 'ceiling'
              : 'incumbent',
      rate,
      label: `${(rate / none).toFixed(2)}×`,
    }
  })
  return {
    $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
    title: {
      text: 'HTTP requests per second',
      subtitle: 'median; the label is the ratio to no limiter on the same framework',
    },
    data: { values },
    facet: {
      row: {
        field: 'framework',
        type: 'nominal',
        title: null,
        sort: [...FRAMEWORKS],
        header: { labelAngle: 0, labelAlign: 'left', labelFontWeight: 'bold' },
      },
    },
    resolve: { scale: { y: 'independent' } },
    spec: {
      width: 420,
      encoding: {
        y: rankedLabels('limiter'),
        x: { field: 'rate', type: 'quantitative', title: 'req/s' },
      },
      layer: [
        {
          mark: 'bar',
          encoding: {
            color: {
              field: 'kind',
              type: 'nominal',
              title: null,
              scale: {
                domain: ['no limiter', 'Tollgate', 'incumbent', 'ceiling'],
                range: ['#b8b8b8', '#d6604d', '#4393c3', '#878787'],
              },
            },
          },
        },
        { mark: { type: 'text', align: 'left', dx: 3 }, encoding: { text: { field: 'label' } } },
      ],
    },
  }
}

function bytesChart(results: BenchResults): TopLevelSpec | undefined {
  if (results.bytes.length === 0) return undefined
  const values = results.bytes.map((cell) => ({
    contender: labelOf(contenderOf(cell.contender)),
    rank: CONTENDERS.findIndex((c) => c.id === cell.contender),
    hits: `${cell.hits} hit${cell.hits === 1 ? '' : 's'}`,
    bytes: cell.memoryUsagePerKey * cell.keysPerIdentifier,
    role: roleName(contenderOf(cell.contender).role),
  }))
  return {
    $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
    title: { text: 'Redis bytes per identifier, 100 per minute', subtitle: 'MEMORY USAGE of the identifier’s keys' },
    data: { values },
    width: 420,
    mark: 'bar',
    encoding: {
      y: rankedLabels('contender'),
      yOffset: { field: 'hits', type: 'nominal' },
      x: { field: 'bytes', type: 'quantitative', title: 'bytes' },
      color: { field: 'hits', type: 'nominal', title: null },
    },
  }
}

function exactnessChart(results: BenchResults): TopLevelSpec | undefined {
  if (results.exactness.length === 0) return undefined
  const limit = results.config.exactness.limit
  const values = results.exactness.map((cell) => ({
    contender: labelOf(contenderOf(cell.contender)),
    rank: CONTENDERS.findIndex((c) => c.id === cell.contender),
    admitted: cell.admitted,
    role: roleName(contenderOf(cell.contender).role),
  }))
  return {
    $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
    title: {
      text: 'Exactness: admitted of 4 × 1,000 concurrent hits on one key',
      subtitle: `the line is the limit, ${limit.toLocaleString('en-US')}`,
    },
    width: 420,
    layer: [
      {
        data: { values },
        mark: 'bar',
        encoding: {
          y: rankedLabels('contender'),
          x: { field: 'admitted', type: 'quantitative', title: 'admitted' },
          color: { field: 'role', type: 'nominal', scale: ROLE_COLORS, title: null },
        },
      },
      {
        data: { values },
        mark: { type: 'text', align: 'left', dx: 4 },
        encoding: {
          y: { field: 'contender', type: 'nominal', sort: { field: 'rank', op: 'min' } },
          x: { field: 'admitted', type: 'quantitative' },
          text: { field: 'admitted', type: 'quantitative', format: ',' },
        },
      },
      {
        data: { values: [{ limit }] },
        mark: { type: 'rule', color: 'black', strokeDash: [4, 3] },
        encoding: { x: { field: 'limit', type: 'quantitative' } },
      },
    ],
  }
}

export async function chartsOf(results: BenchResults): Promise<Chart[]> {
  const specs: Array<[string, TopLevelSpec | undefined]> = [
    ['decisions.svg', decisionsChart(results)],
    ['redis-commands.svg', commandsChart(results)],
    ['http.svg', httpChart(results)],
    ['bytes.svg', bytesChart(results)],
    ['exactness.svg', exactnessChart(results)],
  ]
  const charts: Chart[] = []
  for (const [file, spec] of specs) if (spec) charts.push({ file, svg: await render(spec) })
  return charts
}
