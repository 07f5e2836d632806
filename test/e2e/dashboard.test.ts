// The dashboard in a real browser: the worker as deployed (wrangler deploy --dry-run,
// served by workerd through Miniflare) in front of the local origin, with analytics on; traffic
// through the proxy, some of it denied; then Debian's Chromium, driven by playwright-core, logs
// in with HTTP Basic (the admin token as password) and must show the rules, the denials and the top
// key, and a usage rule's units and top spenders. The screenshot is kept in test-results/ (CI's artifact).
//
// Without Chromium (/usr/bin/chromium, or CHROMIUM_PATH) this test is skipped with a loud
// message; .ci/run installs it (apt-get install -y chromium) when it can.
import { existsSync, mkdirSync, rmSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { serveWorker, tempDir, wranglerBundle } from "../../tools/infra.mjs";
import { startOrigin } from "../../tools/origin-server.mjs";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";
const haveChromium = existsSync(CHROMIUM);
const SCREENSHOT = path.join(ROOT, "test-results", "dashboard.png");
const TOKEN = "browser-test-token";
const ADMIN_TOKEN = "browser-test-admin-token";
const run = crypto.randomUUID().slice(0, 8);
const prefix = `test-dashboard-${run}`;

// design.md "A real browser": the flags that work as root without a network.
const CHROMIUM_ARGS = [
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];

if (!haveChromium) {
  console.warn(
    [
      "",
      "!".repeat(78),
      `!!! SKIPPED test/e2e/dashboard.test.ts: no Chromium at ${CHROMIUM}.`,
      "!!! Install it (apt-get install -y chromium) or set CHROMIUM_PATH to run the browser test.",
      "!".repeat(78),
      "",
    ].join("\n"),
  );
}

describe.skipIf(!haveChromium)("the dashboard in headless Chromium", () => {
  let worker: { url: string; dispose: () => Promise<void> };
  let origin: { url: string; close(): Promise<void> };
  const tmp = tempDir();

  beforeAll(async () => {
    origin = await startOrigin();
    const scriptPath = await wranglerBundle(path.join(tmp, "worker"));
    worker = await serveWorker({
      scriptPath,
      bindings: {
        UPSTASH_REDIS_REST_URL: inject("bridgeUrl"),
        UPSTASH_REDIS_REST_TOKEN: inject("bridgeToken"),
        LIMITER_TOKEN: TOKEN,
        LIMITER_ADMIN_TOKEN: ADMIN_TOKEN,
        ORIGIN_URL: origin.url,
        // A region whose store is the same bridge (its keys are home's + ":region"), this worker
        // pinned to it: the "regional" rule's decisions are counted under "lab".
        UPSTASH_REDIS_REST_URL_LAB: inject("bridgeUrl"),
        UPSTASH_REDIS_REST_TOKEN_LAB: inject("bridgeToken"),
        LIMITER_REGION: "lab",
        LIMITER_CONFIG: JSON.stringify({
          prefix,
          // keyLabels: a header rule's top keys (SHA-256 digests) shown with their raw value.
          analytics: { enabled: true, keyLabels: true },
          networkBlocks: true,
          regions: { lab: { store: "LAB" } },
          rules: [
            {
              name: "regional",
              match: { path: "/regional/*" },
              limit: 100,
              window: "1m",
              key: "ip",
              lease: true,
            },
            { name: "api", match: { path: "/api/*" }, limit: 5, window: "1m", key: "ip" },
            {
              name: "login",
              match: { path: "/login", methods: ["POST"] },
              limit: 2,
              window: "1m",
              key: "ip",
            },
            {
              name: "quota",
              match: { path: "/reports/*" },
              limit: 1,
              window: "1m",
              key: "header:x-api-key",
              overrides: true,
            },
            // A usage rule: 500 units reserved per stream, settled to the usage its last event
            // reports (docs/usage.md).
            {
              name: "tokens",
              match: { path: "/sse/*" },
              limit: 100_000,
              window: "1m",
              key: "header:x-api-key",
              cost: 500,
              usage: { json: "usage.total_tokens" },
            },
          ],
        }),
      },
    });
  }, 120_000);

  afterAll(async () => {
    await worker?.dispose();
    await origin?.close();
    rmSync(tmp, { recursive: true, force: true });
    await deleteKeys(`${prefix}*`);
  });

  it("logs in, and shows the rules, the denials and the top denied key", async () => {
    // Traffic through the proxy: 203.0.113.66 floods /api (5 admitted, 7 denied), two others
    // stay within it; one client fails a third login.
    const statuses: number[] = [];
    const send = async (pathname: string, ip: string, method = "GET") => {
      const res = await fetch(`${worker.url}${pathname}`, {
        method,
        headers: { "CF-Connecting-IP": ip },
        ...(method === "POST" ? { body: "user=a" } : {}),
      });
      await res.arrayBuffer();
      statuses.push(res.status);
    };
    for (let i = 0; i < 12; i++) await send("/api/items", "203.0.113.66");
    for (let i = 0; i < 3; i++) await send("/api/items", "203.0.113.7");
    for (let i = 0; i < 2; i++) await send("/api/items", "203.0.113.8");
    for (let i = 0; i < 3; i++) await send("/login", "203.0.113.9", "POST");
    // A header rule: its top key is the SHA-256 of the API key, found by typing the raw value.
    for (let i = 0; i < 2; i++) {
      const res = await fetch(`${worker.url}/reports/monthly`, {
        headers: { "X-API-Key": `cust-${run}` },
      });
      await res.arrayBuffer();
      statuses.push(res.status);
    }
    for (let i = 0; i < 6; i++) await send("/regional/items", "203.0.113.20");
    // Plans (docs/plans.md): a network blocked (its 2 requests refused 403, counted as blocked)
    // and a customer's own limit.
    const admin = (route: string, body: unknown) =>
      fetch(`${worker.url}/check/${route}`, {
        method: "POST",
        headers: { Authorization: `Bearer ${ADMIN_TOKEN}`, "Content-Type": "application/json" },
        body: JSON.stringify(body),
      });
    expect((await admin("block", { ip: "198.51.100.0/24" })).status).toBe(200);
    expect((await admin("override", { rule: "quota", key: `vip-${run}`, limit: 50 })).status).toBe(
      200,
    );
    for (let i = 0; i < 2; i++) await send("/api/items", "198.51.100.5");
    expect(statuses.filter((s) => s === 429)).toHaveLength(9);
    expect(statuses.filter((s) => s === 403)).toHaveLength(2);
    // Streams through the usage rule: cust-a uses 120 twice, cust-b 900 once (each reserved 500).
    for (const [customer, tokens] of [
      ["a", 120],
      ["a", 120],
      ["b", 900],
    ] as const) {
      const res = await fetch(`${worker.url}/sse/${run}/${tokens}`, {
        headers: { "X-API-Key": `cust-${customer}-${run}` },
      });
      expect(res.status).toBe(200);
      await res.text();
    }
    // The proxy settles a stream when its body has ended, in the background: wait until the
    // stats count all three settles (a condition, not a time).
    const unitsNow = async () => {
      const res = await fetch(`${worker.url}/check/stats?minutes=5`, {
        headers: { Authorization: `Bearer ${ADMIN_TOKEN}` },
      });
      const body = (await res.json()) as { rules: { rule: string; totals: { units?: number } }[] };
      return body.rules.find((rule) => rule.rule === "tokens")?.totals.units;
    };
    for (let i = 0; i < 200 && (await unitsNow()) !== 1_140; i++) {
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
    expect(await unitsNow()).toBe(1_140);

    const browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
    try {
      // Without credentials: a 401 with a Basic challenge, which a headless browser, having no
      // one to ask, gives up on; with a wrong password, still a 401.
      const anonymous = await browser.newContext();
      const refused = await anonymous.request.get(`${worker.url}/check/dashboard`);
      expect(refused.status()).toBe(401);
      expect(refused.headers()["www-authenticate"]).toMatch(/^Basic realm="edge-limiter"/);
      await expect(
        (await anonymous.newPage()).goto(`${worker.url}/check/dashboard`),
      ).rejects.toThrow(/ERR_INVALID_AUTH_CREDENTIALS/);
      await anonymous.close();
      const wrong = await browser.newContext({
        httpCredentials: { username: "ops", password: "not-the-token" },
      });
      const wrongAnswer = await (await wrong.newPage()).goto(`${worker.url}/check/dashboard`);
      expect(wrongAnswer?.status()).toBe(401);
      await wrong.close();
      // The decision token as the password: a 401 too (with a 403 the browser would keep
      // resending it), naming the token the dashboard takes.
      const decider = await browser.newContext({
        httpCredentials: { username: "ops", password: TOKEN },
      });
      const deciderAnswer = await (await decider.newPage()).goto(`${worker.url}/check/dashboard`);
      expect(deciderAnswer?.status()).toBe(401);
      expect(await deciderAnswer?.text()).toContain("LIMITER_ADMIN_TOKEN");
      await decider.close();

      const context = await browser.newContext({
        httpCredentials: { username: "ops", password: ADMIN_TOKEN },
        viewport: { width: 1280, height: 900 },
      });
      const page = await context.newPage();
      const external: string[] = [];
      page.on("request", (request) => {
        if (!request.url().startsWith(worker.url)) external.push(request.url());
      });
      const response = await page.goto(`${worker.url}/check/dashboard`);
      expect(response?.status()).toBe(200);
      // The page is drawn whole: the moment the rules' cards appear, the Plans card has its
      // tables too (a screenshot taken at load is never rules beside an empty Plans card).
      await page.waitForSelector('section[data-rule="api"]');
      expect(await page.locator("#plans table.plans").count()).toBeGreaterThan(0);
      await page.waitForSelector('body[data-loaded] section[data-rule="api"]');

      const api = page.locator('section[data-rule="api"]');
      expect(await api.locator(".allowed b").textContent()).toBe("10");
      expect(await api.locator(".denied b").textContent()).toBe("9");
      // The first denial came from the denial cache already (the 5th admission left 0).
      expect(await api.locator(".cached b").textContent()).toBe("7");
      expect(await api.locator(".top-keys td.key").first().textContent()).toBe("203.0.113.66");
      expect(await api.locator(".top-keys td.count").first().textContent()).toBe("7");
      expect(await api.locator("svg rect.bar-denied").count()).toBeGreaterThan(0);
      expect(await api.locator('[data-source="cache"]').textContent()).toContain("(7)");
      expect(await api.locator('[data-source="block"]').textContent()).toContain("(2)");
      // The plans: the network block and the override, listed with what they do.
      expect(
        await page.locator('table.plans[data-what="network"] td.key').allTextContents(),
      ).toEqual(["ip 198.51.100.0/24"]);
      const override = page.locator('table.plans[data-what="overrides"] tr');
      expect(await override.count()).toBe(1);
      // With analytics.keyLabels the key as the admin set it, beside its digest.
      expect(await override.locator("td").allTextContents()).toEqual([
        "quota",
        expect.stringMatching(new RegExp(`^key vip-${run}[0-9a-f]{12}…$`)),
        "limit 50",
      ]);
      expect(await override.locator("td.key .digest").getAttribute("title")).toMatch(
        /^[0-9a-f]{64}$/,
      );
      const login = page.locator('section[data-rule="login"]');
      expect(await login.locator(".denied b").textContent()).toBe("1");
      expect(await login.locator(".top-keys td.key").first().textContent()).toBe("203.0.113.9");
      expect(await page.locator("#breaker").textContent()).toBe("closed");
      // The region's decisions, whoever made them (home first, then the region's lease).
      const regional = page.locator('section[data-rule="regional"]');
      expect(
        await regional.locator('table.regions tr[data-region="lab"] td.count').textContent(),
      ).toBe("6");
      expect(await api.locator("table.regions").count()).toBe(0);
      // Each y-axis reads 0, a whole half-way mark and twice it at the top (a top of 1 read
      // "1, 1, 0"; login's 3 read "0, 2, 3").
      for (const rule of ["api", "login", "quota"]) {
        const axis = (
          await page
            .locator(`section[data-rule="${rule}"] svg text[text-anchor=end]`)
            .allTextContents()
        ).map(Number);
        expect(axis[0], rule).toBe(0);
        expect(Number.isInteger(axis[1]) && (axis[1] ?? 0) > 0, rule).toBe(true);
        expect(axis[2], rule).toBe(2 * (axis[1] ?? 0));
      }
      // A header rule's top key is a digest; with analytics.keyLabels the raw key is beside it.
      const quota = page.locator('section[data-rule="quota"]');
      expect(await quota.locator(".top-keys td.key .label").first().textContent()).toBe(
        `cust-${run}`,
      );
      expect(await quota.locator(".top-keys td.key .digest").first().getAttribute("title")).toMatch(
        /^[0-9a-f]{64}$/,
      );
      // The usage rule: units charged (reservations, then the settles' deltas) and its top
      // spenders, most first, each with its raw key beside the digest.
      const tokens = page.locator('section[data-rule="tokens"]');
      expect(await tokens.locator(".units b").textContent()).toBe("1140");
      expect(await tokens.locator("svg rect.bar-units").count()).toBeGreaterThan(0);
      expect(await tokens.locator(".top-spenders td.key .label").allTextContents()).toEqual([
        `cust-b-${run}`,
        `cust-a-${run}`,
      ]);
      expect(await tokens.locator(".top-spenders td.count").allTextContents()).toEqual([
        "900",
        "240",
      ]);
      // A rule without usage has neither.
      expect(await api.locator(".units").count()).toBe(0);
      expect(await api.locator(".top-spenders").count()).toBe(0);
      // Typing a header rule's raw key marks its digest's row (hashed in the page).
      await page.fill("#find", `cust-${run}`);
      await page.waitForSelector('section[data-rule="quota"] tr.found');
      expect(await page.locator("#found").textContent()).toBe("1 row");
      expect(external).toEqual([]);

      mkdirSync(path.dirname(SCREENSHOT), { recursive: true });
      await page.screenshot({ path: SCREENSHOT, fullPage: true });
      expect(existsSync(SCREENSHOT)).toBe(true);
      await context.close();

      // Opened with the credentials in the URL (a bookmark, a curl habit): Chromium refused the
      // page's own fetch of a URL that held them; the page now asks for the origin's.
      const inUrl = await browser.newContext();
      const byUrl = await inUrl.newPage();
      const at = new URL(`${worker.url}/check/dashboard`);
      at.username = "ops";
      at.password = ADMIN_TOKEN;
      expect((await byUrl.goto(at.href))?.status()).toBe(200);
      await byUrl.waitForSelector('body[data-loaded] section[data-rule="api"]');
      expect(await byUrl.locator("#status").getAttribute("class")).not.toBe("error");
      await inUrl.close();
    } finally {
      await browser.close();
    }
  }, 120_000);
});

/** The test's keys on the shared Redis, through the bridge (no other client on the Node side). */
async function deleteKeys(pattern: string) {
  const call = async (command: unknown[]) => {
    const res = await fetch(inject("bridgeUrl"), {
      method: "POST",
      headers: { Authorization: `Bearer ${inject("bridgeToken")}` },
      body: JSON.stringify(command),
    });
    return ((await res.json()) as { result: unknown }).result;
  };
  const keys = (await call(["KEYS", pattern])) as string[];
  if (keys.length > 0) await call(["DEL", ...keys]);
}
