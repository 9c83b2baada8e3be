// The admin page: Preact components written with htm, so that the browser runs this file as it is.
import htm from 'htm'
import { h, render } from 'preact'
import { useEffect, useRef, useState } from 'preact/hooks'
import uPlot from 'uplot'

const html = htm.bind(h)

/** Every decision outcome, in core's DECISION_OUTCOMES order. */
const OUTCOMES = [
  { key: 'allowed', color: '#2f9e44' },
  { key: 'limited', color: '#e03131' },
  { key: 'shed', color: '#f08c00' },
  { key: 'dry_run', color: '#7048e8' },
  { key: 'store_error_allowed', color: '#1c7ed6' },
  { key: 'store_error_denied', color: '#862e9c' },
  { key: 'local_fallback', color: '#0c8599' },
  { key: 'degraded_local', color: '#868e96' },
  { key: 'overloaded', color: '#5c940d' },
  { key: 'blocked', color: '#c2255c' },
]
/** Shown even at zero: the two outcomes every limiter has. */
const ALWAYS_SHOWN = new Set(['allowed', 'limited'])
const CHART_HEIGHT = 220

const count = new Intl.NumberFormat('en')
const seconds = (ms) => `${(ms / 1000).toFixed(1)} s`

/** After this, a page whose stream was refused (503: too many open) or lost for good opens it again. */
const REOPEN_MS = 5_000

/**
 * The last snapshot, and the stream's state: `live`, `stale` (the view is there but Redis has not
 * answered its read: `stale` holds since when and for how long) or `reconnecting`.
 */
function useSnapshot() {
  const [snapshot, setSnapshot] = useState(undefined)
  const [connected, setConnected] = useState(false)
  const [stale, setStale] = useState(undefined)
  useEffect(() => {
    let events
    let reopen
    const open = () => {
      events = new EventSource('./events')
      events.onopen = () => setConnected(true)
      events.onerror = () => {
        setConnected(false)
        // An EventSource retries a dropped stream by itself, but gives up on an answer other than 200.
        if (events.readyState === EventSource.CLOSED) reopen = setTimeout(open, REOPEN_MS)
      }
      events.onmessage = (event) => {
        setSnapshot(JSON.parse(event.data))
        setStale(undefined)
      }
      events.addEventListener('stale', (event) => setStale(JSON.parse(event.data)))
    }
    open()
    return () => {
      clearTimeout(reopen)
      events.close()
    }
  }, [])
  return [snapshot, connected ? (stale ? 'stale' : 'live') : 'reconnecting', stale]
}

const clockTime = (ms) => new Date(ms).toLocaleTimeString('en-GB')

function Staleness({ stale }) {
  if (!stale) return ''
  return html`<p class="error" id="stale">
    Stale since ${clockTime(stale.sinceMs)}: Redis has not answered for ${seconds(stale.waitedMs)}; the figures
    shown are the last it gave.
  </p>`
}

/** Posts a reset with the token, and says what came of it as `{ ok, text }`. */
async function sendReset(token, body, snapshot) {
  try {
    const response = await fetch('./reset', {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${token}` },
      body: JSON.stringify(body),
    })
    const answer = await response.json().catch(() => ({}))
    if (!response.ok) return { ok: false, text: `Refused (${response.status}): ${answer.error ?? response.statusText}` }
    const keys = `${answer.keyCount} key${answer.keyCount === 1 ? '' : 's'}`
    if (answer.existed > 0) {
      return {
        ok: true,
        text: `Reset ${answer.identifier} in ${answer.rule}: ${answer.existed} of ${keys} held state.`,
      }
    }
    return {
      ok: false,
      text: `Nothing to reset: no key of ${answer.identifier} in ${answer.rule} held state (0 of ${keys}).${maskedHint(body, snapshot)}`,
    }
  } catch (error) {
    return { ok: false, text: `Failed: ${error.message}` }
  }
}

/** A masked identifier typed in names no one: say how to reset the offender it stands for. */
function maskedHint(body, snapshot) {
  if (snapshot.identifiersShown || body.identifier === undefined) return ''
  const listed = (snapshot.top ?? []).some((entry) => entry.identifier === body.identifier)
  if (!listed && !/(\*|#[0-9a-f]{8})$/.test(body.identifier)) return ''
  return ' That is an identifier as the page masks it: reset a top offender with the Reset button of its row.'
}

function App() {
  const [snapshot, status, stale] = useSnapshot()
  const [target, setTarget] = useState({ rule: '', identifier: '' })
  // The token lives in this state only: never in the URL, never in storage.
  const [token, setToken] = useState('')
  if (snapshot === undefined) return html`<p class="muted">Connecting…</p><${Staleness} stale=${stale} />`
  const last = snapshot.seconds?.at(-1)
  return html`
    <header>
      <h1>Tollgate</h1>
      <span class="prefix">prefix <code>${snapshot.prefix}</code></span>
      <span class=${status === 'live' ? 'live' : 'live off'} id="connection">${status}</span>
      <span class="muted">${last ? `second ${clockTime(last.second * 1000)}` : ''}</span>
      <span class="epoch" id="epoch">rules epoch <strong>${snapshot.rules?.epoch ?? '–'}</strong></span>
    </header>
    <${Staleness} stale=${stale} />
    ${snapshot.error ? html`<p class="error" id="error">Redis could not be read: ${snapshot.error}</p>` : ''}
    <section class="card wide">
      <h2>Decisions per second</h2>
      <${Rates} second=${last} />
      <${DecisionsChart} seconds=${snapshot.seconds ?? []} />
    </section>
    <section class="card">
      <h2>Refusals by rule and window</h2>
      <${Refusals} refusals=${snapshot.refusals ?? []} />
    </section>
    <section class="card">
      <h2>Top offenders <span class="muted">last 5 minutes</span></h2>
      <${TopOffenders} snapshot=${snapshot} onPick=${setTarget} token=${token} />
    </section>
    <section class="card">
      <h2>Processes</h2>
      <${Processes} snapshot=${snapshot} />
    </section>
    <section class="card">
      <h2>Live rules</h2>
      <${Rules} rules=${snapshot.rules} />
    </section>
    <section class="card wide">
      <h2>Reset an identifier</h2>
      <${ResetForm} snapshot=${snapshot} target=${target} setTarget=${setTarget} token=${token} setToken=${setToken} />
    </section>
  `
}

function Rates({ second }) {
  const shown = OUTCOMES.filter(({ key }) => ALWAYS_SHOWN.has(key) || second?.decisions[key])
  return html`<div class="rates">
    ${shown.map(
      ({ key, color }) => html`<div class="rate">
        <span class="swatch" style=${{ background: color }}></span>
        <strong data-outcome=${key}>${count.format(second?.decisions[key] ?? 0)}</strong>
        <span class="muted">${key.replaceAll('_', ' ')}/s</span>
      </div>`,
    )}
  </div>`
}

/** One uPlot chart, made again only when the set of outcomes to draw changes. */
function DecisionsChart({ seconds: data }) {
  const box = useRef(null)
  const plot = useRef(null)
  const drawn = OUTCOMES.filter(({ key }) => ALWAYS_SHOWN.has(key) || data.some((s) => s.decisions[key]))
  const columns = [data.map((s) => s.second), ...drawn.map(({ key }) => data.map((s) => s.decisions[key] ?? 0))]
  const shape = drawn.map(({ key }) => key).join()
  useEffect(() => {
    const element = box.current
    plot.current = new uPlot(
      {
        width: element.clientWidth,
        height: CHART_HEIGHT,
        scales: { x: { time: true } },
        axes: [{}, { label: 'decisions/s', size: 60 }],
        // The legend names the series; the figures above the chart say the last second's values,
        // so it shows none of its own ('--' until hovered).
        legend: { live: false },
        series: [
          {},
          ...drawn.map(({ key, color }) => ({ label: key, stroke: color, width: 2, points: { show: false } })),
        ],
      },
      columns,
      element,
    )
    const resize = new ResizeObserver(() => plot.current.setSize({ width: element.clientWidth, height: CHART_HEIGHT }))
    resize.observe(element)
    return () => {
      resize.disconnect()
      plot.current.destroy()
    }
  }, [shape])
  useEffect(() => plot.current?.setData(columns), [data])
  return html`<div class="chart" ref=${box}></div>`
}

function Refusals({ refusals }) {
  if (refusals.length === 0) return html`<p class="muted">No refusals in the last minute.</p>`
  return html`<table id="refusals">
    <thead><tr><th>rule</th><th>window</th><th class="n">last second</th><th class="n">last minute</th></tr></thead>
    <tbody>
      ${refusals.map(
        (r) => html`<tr key=${`${r.rule}\t${r.window}`}>
          <td>${r.rule}</td><td>${r.window}</td>
          <td class="n">${count.format(r.lastSecond)}</td><td class="n">${count.format(r.lastMinute)}</td>
        </tr>`,
      )}
    </tbody>
  </table>`
}

/** Each row of a view that allows resets has a Reset button, which sends the row's handle: the view resets the identifier it masked. */
function TopOffenders({ snapshot, onPick, token }) {
  const { top = [], identifiersShown, resets } = snapshot
  const [result, setResult] = useState(undefined)
  const resetRow = async (event, entry) => {
    event.stopPropagation()
    if (token === '') {
      setResult({ ok: false, text: "Enter the view's token in the reset form first." })
      return
    }
    setResult({ pending: true, text: 'Resetting…' })
    setResult(await sendReset(token, { handle: entry.handle }, snapshot))
  }
  const note = identifiersShown
    ? html`<p class="muted">Click a row to fill in the reset form.</p>`
    : html`<p class="muted">Identifiers are masked; start the view with identifiers shown to see them.${resets ? ' Reset sends the row, not its identifier: the view resets the one it masked.' : ''}</p>`
  if (top.length === 0) return html`<p class="muted">No identifier refused in the last 5 minutes.</p>${note}`
  return html`<table id="top">
      <thead><tr><th>rule</th><th>identifier</th><th class="n">refusals</th><th>blocked</th>${resets ? html`<th></th>` : ''}</tr></thead>
      <tbody>
        ${top.map(
          (entry, i) => html`<tr
            key=${entry.handle ?? i}
            class=${identifiersShown ? 'pick' : ''}
            onClick=${identifiersShown ? () => onPick({ rule: entry.rule, identifier: entry.identifier }) : undefined}
          >
            <td>${entry.rule}</td><td><code>${entry.identifier}</code></td><td class="n">${count.format(entry.refusals)}</td>
            <td class=${entry.blockedUntilMs ? 'warn' : 'muted'}>${entry.blockedUntilMs ? `for ${seconds(entry.blockedUntilMs - snapshot.atMs)}` : '–'}</td>
            ${resets ? html`<td><button type="button" class="row-reset" disabled=${!entry.handle} onClick=${(event) => resetRow(event, entry)}>Reset</button></td>` : ''}
          </tr>`,
        )}
      </tbody>
    </table>
    ${result ? html`<output id="offender-reset-result" class=${result.ok ? 'ok' : result.pending ? 'muted' : 'warn'}>${result.text}</output>` : ''}
    ${note}`
}

function Processes({ snapshot }) {
  const { processes = [], atMs } = snapshot
  if (processes.length === 0) return html`<p class="muted">No process wrote in the last few seconds.</p>`
  const hybrids = processes.some(({ hybrid }) => hybrid)
  return html`<table id="processes">
    <thead><tr><th>process</th><th class="n">last write</th><th>store</th><th class="n">staleness</th><th class="n" title="Units a HybridStore pushed above a window's limit at its syncs: what it admitted past the limit between syncs, within its stated bound">over-admitted</th></tr></thead>
    <tbody>
      ${processes.map(({ instance, atMs: at, hybrid }) => {
        const over = hybrid ? Object.entries(hybrid.overAdmittedByRule) : []
        return html`<tr key=${instance}>
          <td><code>${instance}</code></td>
          <td class="n">${seconds(Math.max(0, atMs - at))} ago</td>
          <td>${hybrid ? `hybrid, ${hybrid.mode}, ${hybrid.instances} live` : 'no hybrid'}</td>
          <td class=${hybrid && hybrid.mode !== 'synced' ? 'n warn' : 'n'}>${hybrid ? seconds(hybrid.stalenessMs) : '–'}</td>
          <td class="n">${hybrid ? over.map(([rule, units]) => `${rule}: ${count.format(units)}`).join(', ') || '0' : '–'}</td>
        </tr>`
      })}
    </tbody>
  </table>
  ${
    hybrids
      ? html`<p class="muted" id="over-admitted-note">Over-admitted: units a HybridStore let through above a window's limit between two syncs, pushed to Redis at the next; the fleet's bound on it is in docs/hybrid.md.</p>`
      : ''
  }`
}

function Rules({ rules }) {
  if (!rules) return html`<p class="muted">Not read yet.</p>`
  return html`<dl class="rules">
    <dt>epoch</dt><dd><strong>${rules.epoch}</strong>${rules.stale ? html` <span class="warn">(stale: Redis not read)</span>` : ''}</dd>
    <dt>in force</dt><dd>${rules.names.length ? rules.names.join(', ') : html`<span class="muted">none known</span>`}</dd>
    ${rules.rejected.length ? html`<dt>rejected</dt><dd class="warn">${rules.rejected.join(', ')}</dd>` : ''}
  </dl>
  ${
    rules.details?.length
      ? html`<table id="rules">
          <thead><tr><th>rule</th><th>windows</th><th>besides</th></tr></thead>
          <tbody>
            ${rules.details.map(
              ({ name, windows, notes }) =>
                html`<tr key=${name}><td>${name}</td><td>${windows}</td><td class="muted">${notes.join('; ')}</td></tr>`,
            )}
          </tbody>
        </table>`
      : ''
  }`
}

function ResetForm({ snapshot, target, setTarget, token, setToken }) {
  const [result, setResult] = useState(undefined)
  if (!snapshot.resets) {
    return html`<p class="muted" id="read-only">Read-only: start the view with a token to reset identifiers.</p>`
  }
  const submit = async (event) => {
    event.preventDefault()
    setResult({ pending: true, text: 'Resetting…' })
    setResult(await sendReset(token, target, snapshot))
  }
  return html`<form class="reset" onSubmit=${submit}>
    <label>rule
      <input name="rule" list="rule-names" required value=${target.rule}
        onInput=${(e) => setTarget({ ...target, rule: e.currentTarget.value })} />
    </label>
    <datalist id="rule-names">${snapshot.rules?.names.map((name) => html`<option value=${name} />`)}</datalist>
    <label>identifier
      <input name="identifier" required placeholder="ip:203.0.113.7" value=${target.identifier}
        onInput=${(e) => setTarget({ ...target, identifier: e.currentTarget.value })} />
    </label>
    <label>token
      <input name="token" type="password" autocomplete="off" value=${token}
        onInput=${(e) => setToken(e.currentTarget.value)} />
    </label>
    <button type="submit">Reset</button>
    ${result ? html`<output id="reset-result" class=${result.ok ? 'ok' : result.pending ? 'muted' : 'warn'}>${result.text}</output>` : ''}
  </form>`
}

render(html`<${App} />`, document.getElementById('app'))
