// Starting, stopping, and Redis going away. These tests run their own redis-server (from PATH) on
// a free port, so they can kill it without disturbing the shared one.
import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import net from "node:net";
import { tmpdir } from "node:os";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { RedisUnavailableError } from "../../bridge/resp-connection.mjs";
import { startBridge } from "../../bridge/server.mjs";
import { privateRedisArgs } from "../../tools/redis.mjs";
import { bridgeRedis } from "../support/bridge-client.js";

const root = fileURLToPath(new URL("../..", import.meta.url));
const cleanups: (() => unknown)[] = [];

afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
});

async function freePort(): Promise<number> {
  const server = net.createServer().listen(0, "127.0.0.1");
  await once(server, "listening");
  const { port } = server.address() as net.AddressInfo;
  server.close();
  await once(server, "close");
  return port;
}

async function startRedis(port: number, extraArgs: string[] = []): Promise<ChildProcess> {
  // No persistence: nothing is written to the directory.
  const child = spawn("redis-server", [...privateRedisArgs(port, tmpdir()), ...extraArgs], {
    stdio: "ignore",
  });
  cleanups.push(() => child.kill("SIGKILL"));
  const deadline = Date.now() + 5000;
  for (;;) {
    const ok = await new Promise<boolean>((resolve) => {
      const socket = net.connect(port, "127.0.0.1", () => {
        socket.end();
        resolve(true);
      });
      socket.on("error", () => resolve(false));
    });
    if (ok) return child;
    if (Date.now() > deadline) throw new Error(`redis-server on ${port} did not start`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function stopRedis(child: ChildProcess) {
  child.kill("SIGKILL");
  if (child.exitCode === null && child.signalCode === null) await once(child, "exit");
}

describe("startBridge", () => {
  it("rejects at once, naming the URL, when Redis is unreachable", async () => {
    const port = await freePort();
    const started = Date.now();
    const attempt = startBridge({ port: 0, token: "t", redisUrl: `redis://127.0.0.1:${port}` });
    await expect(attempt).rejects.toThrow(RedisUnavailableError);
    await expect(attempt).rejects.toThrow(`redis://127.0.0.1:${port}`);
    // No reconnect loop: a client that retried would wait far longer (ioredis: forever).
    expect(Date.now() - started).toBeLessThan(5000);
  });

  it("authenticates and selects the database from the URL", async () => {
    const port = await freePort();
    await startRedis(port, ["--requirepass", "s3cret"]);
    const noPassword = startBridge({ port: 0, token: "t", redisUrl: `redis://127.0.0.1:${port}` });
    await expect(noPassword).rejects.toThrow(RedisUnavailableError);
    await expect(noPassword).rejects.toThrow(/NOAUTH/);
    const wrong = startBridge({ port: 0, token: "t", redisUrl: `redis://:nope@127.0.0.1:${port}` });
    await expect(wrong).rejects.toThrow(/WRONGPASS|invalid password/);
    await expect(wrong).rejects.not.toThrow(/nope/); // the password stays out of messages

    const bridge = await startBridge({
      port: 0,
      token: "t",
      redisUrl: `redis://:s3cret@127.0.0.1:${port}/3`,
    });
    cleanups.push(() => bridge.close());
    const redis = bridgeRedis({ url: bridge.url, token: "t" });
    await redis.set("in-db-3", "yes");
    // Read it back through a second bridge on database 0: it must not be there.
    const db0 = await startBridge({
      port: 0,
      token: "t",
      redisUrl: `redis://:s3cret@127.0.0.1:${port}`,
    });
    cleanups.push(() => db0.close());
    expect(await bridgeRedis({ url: db0.url, token: "t" }).get("in-db-3")).toBeNull();
    expect(await redis.get("in-db-3")).toBe("yes");
    expect(await redis.multi().get("in-db-3").exec()).toEqual(["yes"]);
  });

  it("refuses to run without a token", async () => {
    await expect(startBridge({ port: 0, token: "" })).rejects.toThrow(/token/);
  });

  it("answers 503 promptly while Redis is down, and recovers when it returns", async () => {
    const redisPort = await freePort();
    let redisServer = await startRedis(redisPort);
    const token = "lifecycle-token";
    const logs: string[] = [];
    const bridge = await startBridge({
      port: 0,
      token,
      redisUrl: `redis://127.0.0.1:${redisPort}`,
      log: (line) => logs.push(line),
    });
    cleanups.push(() => bridge.close());
    const redis = bridgeRedis({ url: bridge.url, token });
    expect(await redis.set("k", "before")).toBe("OK");

    await stopRedis(redisServer);
    const started = Date.now();
    await expect(redis.get("k")).rejects.toThrow(/unavailable/);
    // Answered at once, not after a reconnect loop (the bound is generous for a busy machine).
    expect(Date.now() - started).toBeLessThan(5000);
    const raw = await fetch(`${bridge.url}/pipeline`, {
      method: "POST",
      headers: { authorization: `Bearer ${token}` },
      body: '[["ping"]]',
    });
    expect(raw.status).toBe(503);
    expect(await raw.json()).toEqual({ error: expect.stringContaining(`127.0.0.1:${redisPort}`) });
    const multi = await fetch(`${bridge.url}/multi-exec`, {
      method: "POST",
      headers: { authorization: `Bearer ${token}` },
      body: '[["ping"]]',
    });
    expect(multi.status).toBe(503);

    redisServer = await startRedis(redisPort);
    const deadline = Date.now() + 5000;
    let answer: unknown;
    while (Date.now() < deadline) {
      answer = await redis.set("k", "after").catch((error: Error) => error.message);
      if (answer === "OK") break;
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(answer).toBe("OK");
    expect(await redis.multi().get("k").exec()).toEqual(["after"]);
    expect(logs.join("\n")).toMatch(/reconnected/);
  });
});

describe("npm run bridge (bridge/main.mjs)", () => {
  function runCli(env: Record<string, string>) {
    const child = spawn(process.execPath, ["bridge/main.mjs"], {
      cwd: root,
      env: { ...process.env, ...env },
      stdio: ["ignore", "pipe", "pipe"],
    });
    cleanups.push(() => child.kill("SIGKILL"));
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d) => {
      stdout += d;
    });
    child.stderr.on("data", (d) => {
      stderr += d;
    });
    return { child, out: () => stdout, err: () => stderr };
  }

  it("exits 1 with a one-line hint when Redis is unreachable", async () => {
    const port = await freePort();
    const cli = runCli({ BRIDGE_PORT: "0", REDIS_URL: `redis://127.0.0.1:${port}` });
    const [code] = await once(cli.child, "exit");
    expect(code).toBe(1);
    const lines = cli.err().trim().split("\n");
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain(`redis://127.0.0.1:${port}`);
    expect(lines[0]).toMatch(/redis-server/);
    expect(lines[0]).toMatch(/REDIS_URL/);
  });

  it("serves with BRIDGE_TOKEN and stops cleanly on SIGTERM", async () => {
    const cli = runCli({ BRIDGE_PORT: "0", BRIDGE_TOKEN: "cli-token" });
    const deadline = Date.now() + 5000;
    while (!/http:\/\/\S+/.test(cli.out()) && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 50));
    }
    const url = /http:\/\/[\d.]+:\d+/.exec(cli.out())?.[0];
    expect(url).toBeDefined();
    expect(cli.out()).not.toContain("cli-token");
    const res = await fetch(`${url}/`, {
      method: "POST",
      headers: { authorization: "Bearer cli-token" },
      body: '["ping"]',
    });
    expect(await res.json()).toEqual({ result: "PONG" });
    cli.child.kill("SIGTERM");
    const [code] = await once(cli.child, "exit");
    expect(code).toBe(0);
  });
});
