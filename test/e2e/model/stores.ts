/**
 * The model test's stores: private redis-servers, each behind the project's REST bridge, each
 * bridge reached through a TCP proxy the test breaks on purpose (the one network boundary it
 * fakes). A proxy is "up" (bytes pass), "down" (every connection is reset, new ones too: a store
 * restarting) or "hang" (connections are accepted and what the client sends is swallowed: a
 * store that never answers; nothing reaches Redis, so a hung call counted nothing).
 */
import net from "node:net";
import { startBridge } from "../../../bridge/server.mjs";
import { startPrivateRedis } from "../../../scripts/lib/redis.mjs";
import { createStoreClient, type StoreClient } from "../../../src/store/upstash-client";

type FaultMode = "up" | "down" | "hang";

interface FaultProxy {
  url: string;
  mode(): FaultMode;
  set(mode: FaultMode): void;
  close(): Promise<void>;
}

/** A TCP proxy in front of `port` on 127.0.0.1 whose mode the test sets. */
async function faultProxy(port: number): Promise<FaultProxy> {
  let mode: FaultMode = "up";
  const open = new Set<net.Socket>();
  const server = net.createServer((client) => {
    open.add(client);
    const upstream = net.connect({ host: "127.0.0.1", port });
    const drop = () => {
      open.delete(client);
      client.destroy();
      upstream.destroy();
    };
    client.on("error", drop);
    upstream.on("error", drop);
    client.on("close", drop);
    upstream.on("close", drop);
    if (mode === "down") return drop();
    client.on("data", (chunk) => {
      if (mode === "up") upstream.write(chunk);
      else if (mode === "down") drop();
      // "hang": swallowed.
    });
    upstream.on("data", (chunk) => client.write(chunk));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address() as net.AddressInfo;
  return {
    url: `http://127.0.0.1:${address.port}`,
    mode: () => mode,
    set(next) {
      mode = next;
      // A connection that carried a swallowed request must not carry the next one.
      if (next !== "up") for (const socket of open) socket.destroy();
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of open) socket.destroy();
        server.close(() => resolve());
      }),
  };
}

export interface ModelStore {
  name: string;
  proxy: FaultProxy;
  /** A fresh client (one per isolate: isolates share no connection). */
  client(timeoutMs: number): StoreClient;
}

/** `names.length` private redis-servers, each behind a bridge behind a fault proxy. */
export async function startModelStores(
  names: readonly string[],
): Promise<{ stores: ModelStore[]; stop: () => Promise<void> }> {
  const token = `model-${crypto.randomUUID()}`;
  const stops: (() => Promise<void>)[] = [];
  const stores: ModelStore[] = [];
  try {
    for (const name of names) {
      const redis = await startPrivateRedis();
      stops.push(redis.stop);
      const bridge = await startBridge({ port: 0, token, redisUrl: redis.url });
      stops.push(bridge.close);
      const proxy = await faultProxy(Number(new URL(bridge.url).port));
      stops.push(proxy.close);
      stores.push({
        name,
        proxy,
        client: (timeoutMs) =>
          createStoreClient({ url: proxy.url, token, timeoutMs, autoPipeline: false }),
      });
    }
  } catch (error) {
    for (const stop of stops.reverse()) await stop();
    throw error;
  }
  return {
    stores,
    stop: async () => {
      for (const stop of stops.reverse()) await stop();
    },
  };
}
