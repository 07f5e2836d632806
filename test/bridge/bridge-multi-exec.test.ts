// /multi-exec holds a Redis connection of its own for each transaction in flight: the bridge caps
// how many, answering 503 past the cap rather than opening connections without bound. Redis sits
// behind a TCP relay the test can pause, so transactions stay in flight as long as it wants.
import { once } from "node:events";
import net from "node:net";
import { afterAll, describe, expect, inject, it } from "vitest";
import { startBridge } from "../../bridge/server.mjs";
import { bridgeRedis, uniquePrefix } from "../support/bridge-client.js";

const cleanups: (() => unknown)[] = [];
afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
});

/** A relay to the test Redis that holds client bytes while `held`; counts connections. */
async function pausableRelay(target: URL) {
  let held = false;
  const queued: (() => void)[] = [];
  const sockets = new Set<net.Socket>();
  let connections = 0;
  const waiters: { count: number; resolve: () => void }[] = [];
  const server = net.createServer((client) => {
    connections++;
    for (const w of waiters.filter((w) => connections >= w.count)) w.resolve();
    const upstream = net.connect(Number(target.port || 6379), target.hostname);
    sockets.add(client).add(upstream);
    client.on("data", (data) => {
      if (held) queued.push(() => upstream.write(data));
      else upstream.write(data);
    });
    upstream.pipe(client);
    client.on("close", () => upstream.destroy());
    upstream.on("close", () => client.destroy());
    client.on("error", () => {});
    upstream.on("error", () => {});
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const { port } = server.address() as net.AddressInfo;
  cleanups.push(async () => {
    for (const s of sockets) s.destroy();
    server.close();
  });
  return {
    url: `redis://127.0.0.1:${port}`,
    hold() {
      held = true;
    },
    release() {
      held = false;
      for (const send of queued.splice(0)) send();
    },
    /** Resolves once `count` connections have been made in all. */
    connections(count: number) {
      return connections >= count
        ? Promise.resolve()
        : new Promise<void>((resolve) => waiters.push({ count, resolve }));
    },
    get count() {
      return connections;
    },
  };
}

describe("/multi-exec connections", () => {
  it("are capped: past the cap a transaction is answered 503 at once, and the slots come back", async () => {
    const relay = await pausableRelay(new URL(inject("redisUrl")));
    const token = "multi-exec-cap";
    const bridge = await startBridge({ port: 0, token, redisUrl: relay.url, maxTransactions: 2 });
    cleanups.push(() => bridge.close());
    const key = `${uniquePrefix("multi-exec-cap")}k`;
    cleanups.push(() => bridgeRedis().del(key));
    const transaction = () =>
      fetch(`${bridge.url}/multi-exec`, {
        method: "POST",
        headers: { authorization: `Bearer ${token}` },
        body: JSON.stringify([["incr", key]]),
      });

    const shared = relay.count; // the shared connection, made at start
    relay.hold();
    const inFlight = [transaction(), transaction()];
    // Both have their own connection, and are stuck in it.
    await relay.connections(shared + 2);
    const refused = await transaction();
    expect(refused.status).toBe(503);
    expect(((await refused.json()) as { error: string }).error).toMatch(
      /transactions in flight \(at most 2\b/,
    );
    expect(relay.count).toBe(shared + 2); // no connection was opened for it

    relay.release();
    for (const res of await Promise.all(inFlight)) {
      expect(res.status).toBe(200);
      await res.arrayBuffer();
    }
    // The slots are free again.
    const after = await transaction();
    expect(after.status).toBe(200);
    expect(await after.json()).toEqual([{ result: 3 }]);
  });
});
