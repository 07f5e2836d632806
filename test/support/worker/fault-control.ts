/// <reference path="../provided.d.ts" />
import { inject } from "vitest";
import type { ScriptClient } from "../../../src/store/script-runner";
import { createStoreClient, type StoreClient } from "../../../src/store/upstash-client";
import type { FaultMode, FaultStats } from "../../../tools/fault-types";

declare module "vitest" {
  export interface ProvidedContext {
    faultUrl: string;
    refusedUrl: string;
  }
}

/** One scenario on the fault server: its own store URL, fault mode and counters. */
export interface FaultScenario {
  /** The store URL to give the client (requests land in this scenario). */
  url: string;
  set(mode: FaultMode, delayMs?: number): Promise<void>;
  stats(): Promise<FaultStats>;
  /** Polls until no request of this scenario is still pending (the server has settled them). */
  settled(timeoutMs?: number): Promise<FaultStats>;
}

export async function faultScenario(mode: FaultMode, delayMs = 0): Promise<FaultScenario> {
  const base = inject("faultUrl");
  const name = `s-${crypto.randomUUID()}`;
  const scenario: FaultScenario = {
    url: `${base}/${name}`,
    async set(next, delay = delayMs) {
      const res = await fetch(`${base}/__control/${name}`, {
        method: "POST",
        body: JSON.stringify({ mode: next, delayMs: delay, target: inject("bridgeUrl") }),
      });
      await res.arrayBuffer();
    },
    async stats() {
      const res = await fetch(`${base}/__stats/${name}`);
      return res.json<FaultStats>();
    },
    async settled(timeoutMs = 5_000) {
      const until = Date.now() + timeoutMs;
      for (;;) {
        const stats = await scenario.stats();
        if (stats.pending === 0 || Date.now() > until) return stats;
        await new Promise((resolve) => setTimeout(resolve, 25));
      }
    },
  };
  await scenario.set(mode, delayMs);
  return scenario;
}

/**
 * The worker's store client, pointed at a URL (a fault scenario, or the bridge): without the
 * auto-pipeline, as worker/runtime.ts builds it, unless `autoPipeline` says otherwise.
 */
export function storeAt(url: string, timeoutMs: number, autoPipeline = false): StoreClient {
  return createStoreClient({ url, token: inject("bridgeToken"), timeoutMs, autoPipeline });
}

/** A real client that counts the store calls made through it (EVALSHA and EVAL). */
export function counting(client: ScriptClient): {
  store: ScriptClient;
  calls: () => number;
  evals: () => number;
} {
  let calls = 0;
  let evals = 0;
  // Every way a decision reaches the store is counted alike: the client itself, and the
  // clients it hands out for a decision's later calls or for all of them.
  const counted = (scripts: ScriptCalls): ScriptCalls => ({
    evalsha: (sha, keys, args) => {
      calls++;
      return scripts.evalsha(sha, keys, args);
    },
    eval: (script, keys, args) => {
      calls++;
      evals++;
      return scripts.eval(script, keys, args);
    },
  });
  const { withTimeout, withSignal } = client;
  const store: ScriptClient = counted(client);
  // The limiter's second call of a decision (NOSCRIPT → EVAL, a retry on the caller clock)
  // goes through withTimeout when the client has it: count it too.
  if (withTimeout) store.withTimeout = (ms: number) => counted(withTimeout.call(client, ms));
  // Likewise every call of a decision through the deadline's signal (createStoreClient).
  if (withSignal) {
    store.withSignal = (signal: AbortSignal) => counted(withSignal.call(client, signal));
  }
  return { store, calls: () => calls, evals: () => evals };
}

/** The two script calls a ScriptClient makes (and its withTimeout/withSignal hand out). */
type ScriptCalls = Pick<ScriptClient, "evalsha" | "eval">;

/** A clock the test moves by hand. */
export function manualClock(start = 1_800_000_000_000) {
  let t = start;
  return {
    now: () => t,
    set: (value: number) => {
      t = value;
    },
    advance: (ms: number) => {
      t += ms;
    },
  };
}
