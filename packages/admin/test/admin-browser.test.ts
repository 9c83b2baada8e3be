import { existsSync, mkdirSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import {
  createLimiter,
  HybridStore,
  type Limiter,
  MemoryStore,
  RedisStore,
  type RulesOptions,
  shareFleetStats,
} from '@tollgate/core'
import { spawnRedisServer, useRedis } from '@tollgate/test-support'
import { ManualClock } from '@tollgate/test-support/manual-clock'
import { Redis } from 'ioredis'
import { type Browser, chromium, type Page } from 'playwright-core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type AdminServer, startAdminServer } from '../src/index.js'

const CHROMIUM = '/usr/bin/chromium'
// The docs' screenshot is taken again only when asked: each run's process names differ.
const SCREENSHOT = process.env.TOLLGATE_UPDATE_SCREENSHOT
  ? fileURLToPath(new URL('../../../docs/admin-view.png', import.meta.url))
  : join(tmpdir(), `tollgate-admin-view-${process.pid}.png`)
const skipped = !existsSync(CHROMIUM) && !process.env.CI
if (skipped) {
  console.warn(`admin view browser test skipped: ${CHROMIUM} is absent (apt-get install chromium); under CI it runs`)
}

/** A minute's start: the minute windows count the whole run. */
const T0 = 1_763_700_000_000
const TOKEN = 'browser-token-0123456789'
const rules = {
  api: { algorithm: 'fixed-window', windows: [{ limit: 40, period: '1s' }] },
  login: { algorithm: 'fixed-window', windows: [{ limit: 5, period: '1m' }] },
  search: { algorithm: 'fixed-window', windows: [{ limit: 100, period: '1m' }] },
} satisfies RulesOptions

interface PageGlobals {
  document: { querySelector(selector: string): { textContent: string | null } | null }
}

describe.skipIf(skipped)('the admin page in Chromium', () => {
  const redis = useRedis()
  const prefix = `admin-browser-${process.pid}:`
  const clock = new ManualClock(T0)
  const closing: Array<{ close(): unknown }> = []
  let browser: Browser
  let server: AdminServer
  let api: Limiter<keyof typeof rules>
  let login: Limiter<keyof typeof rules>
  let searches: Array<{ limiter: Limiter<keyof typeof rules>; store: HybridStore }>
  let flushes: Array<() => Promise<void>>
  let step = 0

  beforeAll(async () => {
    // Four processes of one fleet: one on its own memory, one on Redis, two on HybridStores.
    api = createLimiter({ rules, store: new MemoryStore({ clock: clock.now, sweepIntervalMs: 0 }) })
    // Asks Redis every time: a refusal held in the process would outlive the reset for up to a second.
    login = createLimiter({
      rules,
      store: new RedisStore({ client: redis(), prefix, clock: clock.now, refusalCache: false }),
    })
    searches = [0, 1].map(() => {
      const store = new HybridStore({ client: redis(), prefix, autoSync: false, clock: clock.now })
      return { store, limiter: createLimiter({ rules, store }) }
    })
    const limiters = [api, login, ...searches.map(({ limiter }) => limiter)]
    const stats = limiters.map((limiter) =>
      shareFleetStats(limiter, { client: redis(), prefix, flushIntervalMs: 60_000, clock: clock.now }),
    )
    flushes = stats.map((s) => () => s.flush())
    closing.push(...limiters, ...stats)
    // 59 seconds of traffic, one at a time, before the page opens; the 60th comes while it is open.
    for (let i = 0; i < 59; i++) await runSecond()
    server = await startAdminServer({
      client: redis(),
      prefix,
      rules,
      token: TOKEN,
      port: 0,
      intervalMs: 100,
      clock: () => clock.now() + 2_000,
    })
    closing.push(server)
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: [
        '--headless',
        '--no-sandbox',
        '--disable-gpu',
        '--disable-quic',
        '--no-first-run',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
      ],
    })
  })

  afterAll(async () => {
    await browser?.close()
    for (const thing of closing.reverse()) await thing.close()
  })

  /** One second of the fleet's traffic, then every process flushes: a wave of users, one of them over its limit, an address guessing passwords, a bot searching on two processes. */
  async function runSecond(): Promise<void> {
    clock.set(T0 + step * 1000)
    const users = 20 + Math.round(12 * Math.sin(step / 6))
    for (let user = 0; user < users; user++) {
      for (let i = 0; i < 8; i++) await api.consume('api', `user:${user}`)
    }
    for (let i = 0; i < 50 + (step % 7) * 5; i++) await api.consume('api', 'user:mallory')
    for (let i = 0; i < 3; i++) await login.consume('login', 'ip:203.0.113.7')
    await login.consume('login', `ip:198.51.100.${step % 40}`)
    for (const { limiter } of searches) for (let i = 0; i < 30; i++) await limiter.consume('search', 'key:crawler')
    if (step % 2 === 0) for (const { store } of searches) await store.syncNow()
    await Promise.all(flushes.map((flush) => flush()))
    step++
  }

  async function open(url: string): Promise<{ page: Page; errors: string[] }> {
    const page = await browser.newPage({ viewport: { width: 1280, height: 900 } })
    const errors: string[] = []
    page.on('pageerror', (error) => errors.push(error.message))
    page.on('console', (message) => {
      if (message.type() === 'error') errors.push(message.text())
    })
    await page.goto(url)
    return { page, errors }
  }

  const rate = async (page: Page, outcome: string) =>
    (await page.locator(`[data-outcome="${outcome}"]`).textContent()) ?? ''
  /** Waits until the page shows another count than `shown` for the outcome. */
  const rateChanges = (page: Page, outcome: string, shown: string) =>
    page.waitForFunction(
      // Runs in the page (whose policy forbids evaluating strings), where `document` is.
      ([selector, text]) =>
        (globalThis as unknown as PageGlobals).document.querySelector(selector)?.textContent !== text,
      [`[data-outcome="${outcome}"]`, shown] as const,
      { timeout: 5_000 },
    )

  it('shows the counts move, refuses a reset without the token and makes one with it', async () => {
    const { page, errors } = await open(server.url)
    // The first snapshot may still be on its way: the counts start at 0.
    await rateChanges(page, 'limited', '0')
    await page.locator('.chart canvas').waitFor({ timeout: 5_000 })
    const before = await rate(page, 'allowed')
    expect(Number(before.replace(/,/g, ''))).toBeGreaterThan(0)
    await expect(page.locator('#top').textContent()).resolves.toContain('ip:203.0.113.*')
    await expect(page.locator('#top').textContent()).resolves.not.toContain('203.0.113.7')
    await expect(page.locator('#processes tbody tr').count()).resolves.toBe(4)
    await expect(page.locator('#processes').textContent()).resolves.toMatch(/search: \d+/)
    // The numbers explained, the rules' limits listed, and no legend of dashes before a hover.
    await expect(page.locator('#over-admitted-note').count()).resolves.toBe(1)
    await expect(page.locator('#rules').textContent()).resolves.toContain('100/1m')
    await expect(page.locator('.u-legend').textContent()).resolves.not.toContain('--')

    // Another second of traffic: the page shows it without being asked.
    await runSecond()
    await rateChanges(page, 'allowed', before)

    await page.fill('input[name="rule"]', 'login')
    await page.fill('input[name="identifier"]', 'ip:203.0.113.7')
    await page.click('button[type="submit"]')
    await expect(
      page.locator('#reset-result').filter({ hasText: 'Refused (403)' }).textContent({ timeout: 5_000 }),
    ).resolves.toContain('token')
    expect((await login.peek('login', 'ip:203.0.113.7')).allowed).toBe(false)

    await page.fill('input[name="token"]', TOKEN)
    await page.click('button[type="submit"]')
    await page
      .locator('#reset-result', { hasText: 'Reset ip:203.0.113.* in login: 1 of 1 key held state.' })
      .waitFor({ timeout: 5_000 })
    expect((await login.consume('login', 'ip:203.0.113.7')).allowed).toBe(true)
    // The token went in a header, never into the page's address.
    expect(page.url()).toBe(server.url)

    // Regression: the identifier as the table masks it names no one, and the page said it was reset.
    await page.fill('input[name="identifier"]', 'ip:203.0.113.*')
    await page.click('button[type="submit"]')
    await expect(
      page.locator('#reset-result', { hasText: 'Nothing to reset' }).textContent({ timeout: 5_000 }),
    ).resolves.toMatch(
      /^Nothing to reset: no key of ip:#[0-9a-f]{8} in login held state \(0 of 1 key\)\. That is an identifier as the page masks it: reset a top offender with the Reset button of its row\.$/,
    )

    // The masked offender's row resets it, by a handle the view maps back to the address.
    for (let i = 0; i < 5; i++) await login.consume('login', 'ip:203.0.113.7')
    expect((await login.peek('login', 'ip:203.0.113.7')).allowed).toBe(false)
    const row = page.locator('#top tbody tr', { hasText: 'ip:203.0.113.*' }).filter({ hasText: 'login' })
    await row.locator('button.row-reset').click()
    await page
      .locator('#offender-reset-result', { hasText: 'Reset ip:203.0.113.* in login: 1 of 1 key held state.' })
      .waitFor({ timeout: 5_000 })
    expect((await login.consume('login', 'ip:203.0.113.7')).allowed).toBe(true)

    mkdirSync(dirname(SCREENSHOT), { recursive: true })
    await page.screenshot({ path: SCREENSHOT, fullPage: true })
    expect(existsSync(SCREENSHOT)).toBe(true)
    // The one error the browser logs is the refused reset's answer.
    expect(errors).toEqual(['Failed to load resource: the server responded with a status of 403 (Forbidden)'])
    await page.close()
  })

  it('shows no reset form on a read-only view', async () => {
    const readOnly = await startAdminServer({ client: redis(), prefix, port: 0, clock: () => clock.now() + 2_000 })
    closing.push(readOnly)
    const { page, errors } = await open(readOnly.url)
    await page.locator('#read-only').waitFor({ timeout: 5_000 })
    await expect(page.locator('button[type="submit"]').count()).resolves.toBe(0)
    expect(errors).toEqual([])
    await page.close()
  })

  it('says stale, not live, while Redis hangs, and live again once it answers', async () => {
    const hanging = await spawnRedisServer()
    const client = new Redis(hanging.url)
    const view = await startAdminServer({ client, port: 0, intervalMs: 100, staleAfterMs: 1_000, onWarning: () => {} })
    try {
      const { page, errors } = await open(view.url)
      const status = page.locator('#connection')
      await status.filter({ hasText: /^live$/ }).waitFor({ timeout: 5_000 })
      hanging.kill('SIGSTOP')
      await status.filter({ hasText: /^stale$/ }).waitFor({ timeout: 5_000 })
      await expect(page.locator('#stale').textContent()).resolves.toMatch(
        /^\s*Stale since \d\d:\d\d:\d\d: Redis has not answered for \d+\.\d s/,
      )
      hanging.kill('SIGCONT')
      await status.filter({ hasText: /^live$/ }).waitFor({ timeout: 5_000 })
      await expect(page.locator('#stale').count()).resolves.toBe(0)
      expect(errors).toEqual([])
      await page.close()
    } finally {
      hanging.kill('SIGCONT')
      await view.close()
      await client.quit()
      await hanging.stop()
    }
  })
})
