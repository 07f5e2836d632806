// BRIDGE_MAX_COMMANDS_PER_SECOND: the bridge throttles billed commands as Upstash caps a
// database. The throttle alone on a fake clock, then the bridge on the real (shared) Redis with
// the same fake clock: what it admits at each instant, in which order, and what a request costs.
// No sleeps and no timing assertions: time moves only when a test advances it.
import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { once } from "node:events";
import { fileURLToPath } from "node:url";
import { Ratelimit } from "@upstash/ratelimit";
import { Redis } from "@upstash/redis";
import { afterAll, describe, expect, inject, it, vi } from "vitest";
import {
  CommandThrottle,
  parseCommandCap,
  type ThrottleClock,
} from "../../bridge/command-throttle.mjs";
import { countingScript } from "../../bridge/script-billing.mjs";
import { type Bridge, STATS_PATH, startBridge } from "../../bridge/server.mjs";
import { measureEnv } from "../../tools/measure-env.mjs";
import { bridgeRedis, deletePrefix, uniquePrefix } from "../support/bridge-client.js";

const root = fileURLToPath(new URL("../..", import.meta.url));
const prefix = uniquePrefix("cap");
const key = (name: string) => `${prefix}${name}`;
const sha1 = (text: string) => createHash("sha1").update(text, "utf8").digest("hex");
const uncapped = bridgeRedis(); // the global setup's bridge: no cap
const cleanups: (() => unknown)[] = [];

afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
  await deletePrefix(uncapped, prefix);
});

/** Time that moves only when told; timers fire, in order, as it passes them. */
class FakeClock implements ThrottleClock {
  private time = 0;
  private timers = new Map<number, { at: number; wake: () => void }>();
  private nextId = 0;
  now = () => this.time;
  setTimer = (wake: () => void, ms: number) => {
    const id = this.nextId++;
    this.timers.set(id, { at: this.time + ms, wake });
    return id;
  };
  clearTimer = (timer: unknown) => {
    this.timers.delete(timer as number);
  };
  advance(ms: number) {
    const end = this.time + ms;
    for (;;) {
      const due = [...this.timers].filter(([, t]) => t.at <= end).sort((a, b) => a[1].at - b[1].at);
      const first = due[0];
      if (!first) break;
      this.timers.delete(first[0]);
      this.time = Math.max(this.time, first[1].at);
      first[1].wake();
    }
    this.time = end;
  }
}

/** A promise and whether it has settled yet. */
function tracked<T>(promise: Promise<T>) {
  const state = { settled: false, promise };
  promise.then(
    () => {
      state.settled = true;
    },
    () => {
      state.settled = true;
    },
  );
  return state;
}

describe("the throttle (at most the cap in any rolling second)", () => {
  it("with a cap of C and 3C commands at once: C a second, the rest wait FIFO, none refused", async () => {
    const clock = new FakeClock();
    const throttle = new CommandThrottle({ perSecond: 10, clock });
    const order: number[] = [];
    const waits = Array.from({ length: 30 }, (_, i) =>
      tracked(throttle.admit(1).then(() => order.push(i))),
    );
    await Promise.resolve();
    expect(throttle.stats()).toMatchObject({ commands: 10, requests: 10, waiting: 20 });

    clock.advance(999); // the first ten still count in the last second
    expect(throttle.stats()).toMatchObject({ commands: 10, waiting: 20 });
    clock.advance(1);
    expect(throttle.stats()).toMatchObject({ commands: 20, waiting: 10, lastSecond: 10 });
    clock.advance(1000);
    await Promise.all(waits.map((w) => w.promise));
    expect(order).toEqual(Array.from({ length: 30 }, (_, i) => i));
    expect(throttle.stats().intervals).toEqual([
      { second: 0, commands: 10 },
      { second: 1, commands: 10 },
      { second: 2, commands: 10 },
    ]);
  });

  it("frees the window as charges age out, one by one", async () => {
    const clock = new FakeClock();
    const throttle = new CommandThrottle({ perSecond: 10, clock });
    for (let t = 0; t < 10; t++) {
      await throttle.admit(1);
      clock.advance(100);
    }
    const next = tracked(throttle.admit(2)); // at 1000: the charge of 0 expires, not the one of 100
    await Promise.resolve();
    expect(next.settled).toBe(false);
    clock.advance(100);
    await next.promise;
    expect(throttle.stats().lastSecond).toBe(10);
  });

  it("holds a smaller request behind a larger one at the head, even one that would fit", async () => {
    const clock = new FakeClock();
    const throttle = new CommandThrottle({ perSecond: 10, clock });
    await throttle.admit(8);
    const large = tracked(throttle.admit(5));
    const small = tracked(throttle.admit(1));
    clock.advance(999);
    await Promise.resolve();
    expect([large.settled, small.settled]).toEqual([false, false]);
    clock.advance(1);
    await Promise.all([large.promise, small.promise]);
  });

  it("admits a request costlier than the cap alone, once the last second is empty", async () => {
    const clock = new FakeClock();
    const throttle = new CommandThrottle({ perSecond: 10, clock });
    await throttle.admit(1);
    const huge = tracked(throttle.admit(25));
    const next = tracked(throttle.admit(1));
    clock.advance(1000);
    await huge.promise;
    expect(throttle.stats().lastSecond).toBe(25);
    clock.advance(999);
    await Promise.resolve();
    expect(next.settled).toBe(false);
    clock.advance(1);
    await next.promise;
  });

  it("settles a script's true count: charged now when it made more, given back when fewer", async () => {
    const clock = new FakeClock();
    const throttle = new CommandThrottle({ perSecond: 10, clock });
    await throttle.admit(10);
    const waiting = tracked(throttle.admit(2));
    throttle.settle(-2); // two fewer than charged: the waiting request fits now
    await waiting.promise;
    throttle.settle(3);
    expect(throttle.stats()).toMatchObject({ commands: 13, lastSecond: 13 });
  });

  it("drops a waiting request whose client went away, uncharged, and rejects all on close", async () => {
    const clock = new FakeClock();
    const throttle = new CommandThrottle({ perSecond: 2, clock });
    await throttle.admit(2);
    const gone = new AbortController();
    const abandoned = throttle.admit(1, gone.signal);
    const behind = tracked(throttle.admit(1));
    gone.abort();
    await expect(abandoned).rejects.toThrow(/went away/);
    clock.advance(1000);
    await behind.promise;
    expect(throttle.stats()).toMatchObject({ commands: 3, waiting: 0 });
    const pending = throttle.admit(5);
    throttle.close();
    await expect(pending).rejects.toThrow(/closing/);
  });

  it("reads BRIDGE_MAX_COMMANDS_PER_SECOND: unset is no cap, anything but a whole number ≥ 1 is refused", () => {
    expect(parseCommandCap(undefined)).toBeUndefined();
    expect(parseCommandCap(" ")).toBeUndefined();
    expect(parseCommandCap("10000")).toBe(10_000);
    for (const bad of ["0", "-5", "1.5", "1e3", "ten", "Infinity"]) {
      expect(() => parseCommandCap(bad)).toThrow(/BRIDGE_MAX_COMMANDS_PER_SECOND/);
    }
  });
});

describe("countingScript", () => {
  it("keeps the shebang line first and every line of the script on its number", () => {
    const script = "#!lua flags=no-writes\nlocal a = 1\nreturn a";
    const wrapped = countingScript(script);
    const lines = wrapped.split("\n");
    expect(lines[0]).toBe("#!lua flags=no-writes");
    expect(lines[1]?.endsWith("local a = 1")).toBe(true);
    expect(lines[2]).toBe("return a");
    expect(countingScript("return 1").split("\n")[0]?.endsWith("return 1")).toBe(true);
  });
});

async function cappedBridge(perSecond: number, clock: ThrottleClock): Promise<Bridge> {
  const bridge = await startBridge({
    port: 0,
    token: "cap-token",
    redisUrl: inject("redisUrl"),
    maxCommandsPerSecond: perSecond,
    clock,
  });
  cleanups.push(() => bridge.close());
  return bridge;
}

async function post(bridge: Bridge, path: string, body: unknown) {
  const res = await fetch(`${bridge.url}${path}`, {
    method: "POST",
    headers: { authorization: "Bearer cap-token", "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  return { status: res.status, json: (await res.json()) as unknown };
}

describe("the bridge under a cap (real Redis)", () => {
  it("with a cap of C and 3C commands at once: C answered, the rest wait FIFO, none refused", async () => {
    const C = 10;
    const clock = new FakeClock();
    const bridge = await cappedBridge(C, clock);
    const counter = key("fifo");
    // Sent one by one, each once the bridge holds the one before, so arrival order is known.
    const calls: ReturnType<typeof tracked<{ status: number; json: unknown }>>[] = [];
    for (let i = 0; i < 3 * C; i++) {
      calls.push(tracked(post(bridge, "/", ["INCR", counter])));
      await vi.waitFor(() => expect(bridge.stats().requests + bridge.stats().waiting).toBe(i + 1), {
        interval: 2,
      });
    }
    await Promise.all(calls.slice(0, C).map((c) => c.promise));
    expect(calls.map((c) => c.settled)).toEqual(calls.map((_, i) => i < C));
    expect(bridge.stats()).toMatchObject({ billedCommands: C, waiting: 2 * C });

    clock.advance(1000);
    await Promise.all(calls.slice(C, 2 * C).map((c) => c.promise));
    expect(bridge.stats()).toMatchObject({ billedCommands: 2 * C, waiting: C });
    clock.advance(1000);
    const answers = await Promise.all(calls.map((c) => c.promise));

    // Every one answered 200, and Redis ran them in the order they arrived.
    expect(answers).toEqual(answers.map((_, i) => ({ status: 200, json: { result: i + 1 } })));
    // No second admitted more than the bucket holds.
    expect(bridge.stats().intervals).toEqual([
      { second: 0, commands: C },
      { second: 1, commands: C },
      { second: 2, commands: C },
    ]);
  });

  it("charges each command of a pipeline and of a transaction", async () => {
    const clock = new FakeClock();
    const bridge = await cappedBridge(1000, clock);
    await post(bridge, "/pipeline", [
      ["SET", key("p"), "1"],
      ["GET", key("p")],
      ["DEL", key("p")],
    ]);
    expect(bridge.stats()).toMatchObject({ billedCommands: 3, requests: 1, commands: 3 });
    await post(bridge, "/multi-exec", [
      ["SET", key("t"), "1"],
      ["DEL", key("t")],
    ]);
    expect(bridge.stats()).toMatchObject({ billedCommands: 5, requests: 2, commands: 5 });
  });

  it("charges a script call with the commands it makes: 3 redis.calls cost 4", async () => {
    const clock = new FakeClock();
    const bridge = await cappedBridge(1000, clock);
    const three = `-- ${prefix} three
redis.call("TIME")
redis.call("SET", KEYS[1], "x")
return redis.call("GET", KEYS[1])`;
    const before = bridge.stats().billedCommands;
    expect(await post(bridge, "/", ["EVAL", three, 1, key("s")])).toEqual({
      status: 200,
      json: { result: "x" },
    });
    expect(bridge.stats().billedCommands - before).toBe(4);
    expect(bridge.stats()).toMatchObject({ scriptCalls: 1, countedScriptCalls: 1 });

    // By SHA, in a pipeline and in a transaction alike; pcall counts too.
    const answer = await post(bridge, "/pipeline", [
      ["EVALSHA", sha1(three), 1, key("s")],
      ["GET", key("s")],
    ]);
    expect(answer.json).toEqual([{ result: "x" }, { result: "x" }]);
    expect(bridge.stats().billedCommands - before).toBe(4 + 5);
    const pcall = `-- ${prefix} pcall\nredis.pcall("INCR", KEYS[1])\nreturn redis.pcall("NOSUCHCOMMAND")`;
    await post(bridge, "/multi-exec", [
      ["DEL", key("n")],
      ["EVAL", pcall, 1, key("n")],
    ]);
    expect(bridge.stats().billedCommands - before).toBe(4 + 5 + 1 + 3);
    expect(bridge.stats()).toMatchObject({ scriptCalls: 3, countedScriptCalls: 3 });
  });

  it("corrects its estimate with the true count, per script, for loops too", async () => {
    const clock = new FakeClock();
    const bridge = await cappedBridge(100, clock);
    const loop = `-- ${prefix} loop
for i = 1, tonumber(ARGV[1]) do redis.call("INCR", KEYS[1]) end
return redis.call("GET", KEYS[1])`;
    await post(bridge, "/", ["EVAL", loop, 1, key("l"), 9]); // charged 1 + 3 first, billed 1 + 10
    expect(bridge.stats().billedCommands).toBe(11);
    // The next calls are charged on arrival as the last one ran: 11 each, 8 fit in 100 - 11.
    const calls = Array.from({ length: 8 }, () =>
      tracked(post(bridge, "/", ["EVALSHA", sha1(loop), 1, key("l"), 9])),
    );
    await Promise.all(calls.map((c) => c.promise));
    expect(bridge.stats()).toMatchObject({ billedCommands: 99, requests: 9 });
    const waiting = tracked(post(bridge, "/", ["EVALSHA", sha1(loop), 1, key("l"), 9]));
    await vi.waitFor(() => expect(bridge.stats().waiting).toBe(1));
    clock.advance(1000);
    expect(await waiting.promise).toEqual({ status: 200, json: { result: "90" } });
    expect(bridge.stats().intervals).toEqual([
      { second: 0, commands: 99 },
      { second: 1, commands: 11 },
    ]);
  });

  it("answers exactly as without a cap: nil, status, errors, nested tables, NOSCRIPT", async () => {
    const clock = new FakeClock();
    const bridge = await cappedBridge(1000, clock);
    const shapes = `#!lua flags=allow-key-locking
-- ${prefix} shapes
redis.call("PING")
local shape = ARGV[1]
if shape == "nil" then return nil end
if shape == "false" then return false end
if shape == "true" then return true end
if shape == "status" then return redis.status_reply("FINE") end
if shape == "error" then return redis.error_reply("MINE went wrong") end
if shape == "float" then return 3.7 end
return {1, "two", {3, "four"}, redis.status_reply("OK")}`;
    for (const shape of ["nil", "false", "true", "status", "error", "float", "table"]) {
      const capped = await post(bridge, "/", ["EVAL", shapes, 0, shape]);
      const res = await fetch(new URL("/", inject("bridgeUrl")), {
        method: "POST",
        headers: { authorization: `Bearer ${inject("bridgeToken")}` },
        body: JSON.stringify(["EVAL", shapes, 0, shape]),
      });
      expect({ shape, ...capped }).toEqual({ shape, status: res.status, json: await res.json() });
    }
    const { status, json } = await post(bridge, "/", ["EVALSHA", "0".repeat(40), 0]);
    expect(status).toBe(400);
    expect(json).toEqual({ error: expect.stringMatching(/^NOSCRIPT/) });
  });

  it("refuses a cap that is not a whole number ≥ 1", async () => {
    for (const bad of [0, -1, 2.5, Number.NaN]) {
      await expect(
        startBridge({
          port: 0,
          token: "t",
          redisUrl: inject("redisUrl"),
          maxCommandsPerSecond: bad,
        }),
      ).rejects.toThrow(/maxCommandsPerSecond/);
    }
  });

  it("serves its figures at GET /_bridge/stats, with the token only", async () => {
    const bridge = await cappedBridge(500, new FakeClock());
    await post(bridge, "/", ["PING"]);
    const url = `${bridge.url}${STATS_PATH}`;
    expect((await fetch(url)).status).toBe(401);
    const res = await fetch(url, { headers: { authorization: "Bearer cap-token" } });
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({
      maxCommandsPerSecond: 500,
      burst: 500,
      billedCommands: 1,
      intervals: [{ second: 0, commands: 1 }],
    });
  });
});

type MeasureEnv = Awaited<ReturnType<typeof measureEnv>>;

describe("the bill of real limiters, against Redis's own count (private redis-server)", () => {
  /** Commands Redis ran (INFO commandstats, our probes left out) and what the bridge billed. */
  async function bothCounts(work: (bridge: Bridge, env: MeasureEnv) => Promise<void>) {
    const env = await measureEnv({ bridge: false });
    cleanups.push(() => env.close());
    const bridge = await startBridge({
      port: 0,
      token: "cap-token",
      redisUrl: env.redis.url,
      maxCommandsPerSecond: 100_000,
    });
    cleanups.push(() => bridge.close());
    await work(bridge, env); // once to load the scripts, uncounted
    env.cli("CONFIG", "RESETSTAT");
    const before = bridge.stats();
    await work(bridge, env);
    let redis = 0;
    for (const line of env.cli("INFO", "commandstats").split("\n")) {
      const match = /^cmdstat_([^:]+):calls=(\d+)/.exec(line.trim());
      if (match?.[1] && !/^(info|config)/.test(match[1])) redis += Number(match[2]);
    }
    const after = bridge.stats();
    return {
      redis,
      billed: after.billedCommands - before.billedCommands,
      counted: after.countedScriptCalls - before.countedScriptCalls,
      scriptCalls: after.scriptCalls - before.scriptCalls,
    };
  }

  it("edge-limiter's sliding log: admissions and denials, billed as Redis ran them", async () => {
    // biome-ignore lint/suspicious/noExplicitAny: the bundled src/index.ts, typed by its own tests
    let lib: any;
    let round = 0;
    const counts = await bothCounts(async (bridge, env) => {
      lib ??= await env.bundle(`export * from "./src/index";`);
      const store = lib.createStoreClient({ url: bridge.url, token: "cap-token", timeoutMs: 5000 });
      const limiter = lib.createLimiter({ store, prefix: `cap${round++}`, denialCache: false });
      for (let i = 0; i < 12; i++) {
        await limiter.limit({ policy: "p", key: `k${i % 3}`, limit: 3, windowMs: 60_000 });
      }
    });
    expect(counts.scriptCalls).toBe(12);
    expect(counts.counted).toBe(12);
    expect(counts.redis).toBeGreaterThan(2 * 12); // the scripts' own commands are in it
    expect(counts.billed).toBe(counts.redis);
  });

  it("@upstash/ratelimit slidingWindow, billed as Redis ran it", async () => {
    let round = 0;
    const counts = await bothCounts(async (bridge) => {
      const ratelimit = new Ratelimit({
        redis: new Redis({ url: bridge.url, token: "cap-token", enableTelemetry: false }),
        limiter: Ratelimit.slidingWindow(3, "1 m"),
        prefix: `cap-anchor${round++}`,
        analytics: false,
        ephemeralCache: false,
      });
      for (let i = 0; i < 12; i++) await ratelimit.limit(`k${i % 3}`);
    });
    expect(counts.scriptCalls).toBe(12);
    expect(counts.counted).toBe(12);
    expect(counts.redis).toBeGreaterThan(2 * 12); // the scripts' own commands are in it
    expect(counts.billed).toBe(counts.redis);
  });
});

describe("without a cap (the default)", () => {
  it("sends scripts as the client wrote them and bills each call at its estimate", async () => {
    const script = `-- ${prefix} verbatim\nreturn redis.call("PING")`;
    expect(await uncapped.eval(script, [], [])).toBe("PONG");
    // Redis holds the script under the client's own SHA: no counting wrapper was sent.
    expect(await uncapped.scriptExists(sha1(script))).toEqual([1]);
  });
});

describe("npm run bridge with BRIDGE_MAX_COMMANDS_PER_SECOND", () => {
  it("refuses to start on a value that is not a whole number ≥ 1, saying why", async () => {
    const child = spawn(process.execPath, ["bridge/main.mjs"], {
      cwd: root,
      env: { ...process.env, BRIDGE_PORT: "0", BRIDGE_MAX_COMMANDS_PER_SECOND: "lots" },
      stdio: ["ignore", "pipe", "pipe"],
    });
    cleanups.push(() => child.kill("SIGKILL"));
    let stderr = "";
    child.stderr.on("data", (d) => {
      stderr += d;
    });
    const [code] = await once(child, "exit");
    expect(code).toBe(1);
    expect(stderr).toMatch(/BRIDGE_MAX_COMMANDS_PER_SECOND must be a whole number/);
    expect(stderr).toContain('"lots"');
  });
});
