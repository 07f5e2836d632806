/**
 * The model test's world for one run: three isolates (limiters) on one manual clock over the
 * private stores, the run's keys, and the reference model. In a run that reshards, isolate 0
 * runs the old config (two shards) until `at` and is then replaced by a new isolate on the new
 * one (a redeploy); isolates 1 and 2 run the new config (three shards, `reshard`) throughout —
 * the premise docs/shards.md states, kept.
 */
import { LONGEST_PERIOD_MS } from "../../../src/limiter/calendar-period";
import { createLimiter } from "../../../src/limiter/create-limiter";
import type { Limiter } from "../../../src/limiter/limiter-api";
import type { NetworkBlocksOptions } from "../../../src/limiter/network-block-copies";
import type { StoreClient } from "../../../src/store/upstash-client";
import type { Feature } from "./features";
import { type Policy, Reference } from "./reference";
import type { ModelStore } from "./stores";

export const SHARDS = ["A", "B", "C"] as const;
/** The limiter's timeoutMs: the longest a call waits, and the reshard's settle interval. */
export const TIMEOUT_MS = 500;
const T0 = 1_900_000_000_000;
/** How old an isolate's copy of the network blocks may be. */
export const BLOCKS_REFRESH_MS = 1_000;

export const POLICIES: Record<string, Policy> = {
  log: { policy: "log", algorithm: "sliding-log", limit: 5, windowMs: 10_000, failMode: "closed" },
  // A second log on its own limit, window and failure policy.
  ring: {
    policy: "ring",
    algorithm: "sliding-log",
    limit: 4,
    windowMs: 8_000,
    failMode: "open",
  },
  plan: {
    policy: "plan",
    algorithm: "sliding-log",
    limit: 4,
    windowMs: 6_000,
    failMode: "open",
    overrides: true,
  },
  lease: {
    policy: "lease",
    algorithm: "sliding-log",
    limit: 12,
    windowMs: 10_000,
    failMode: "closed",
    lease: true,
  },
  fixed: {
    policy: "fixed",
    algorithm: "fixed-window",
    limit: 5,
    windowMs: 10_000,
    failMode: "open",
  },
  counter: {
    policy: "counter",
    algorithm: "sliding-counter",
    limit: 5,
    windowMs: 10_000,
    failMode: "closed",
  },
  bucket: {
    policy: "bucket",
    algorithm: "token-bucket",
    limit: 5,
    windowMs: 10_000,
    failMode: "open",
  },
  conc: { policy: "conc", algorithm: "concurrency", limit: 3, windowMs: 15_000, failMode: "open" },
  // Calendar quotas (docs/calendar-quotas.md), each meeting its own edge: a day in New York
  // from 01:30 (a fall-back day repeats 01:30: the first one starts it; days of 23 and 25 hours),
  // a week in Berlin from Sunday 02:30 (a spring-forward Sunday has no 02:30: 03:30 starts it),
  // a month in UTC from the 31st (months of 28, 29, 30 and 31 days). Each with overrides: a key's
  // own limit and anchor (anchor-steps.ts).
  daily: {
    policy: "daily",
    algorithm: "calendar",
    overrides: true,
    limit: 5,
    windowMs: LONGEST_PERIOD_MS.day,
    failMode: "closed",
    period: {
      unit: "day",
      timezone: "America/New_York",
      anchor: Date.parse("2030-01-01T01:30:00-05:00"),
    },
  },
  weekly: {
    policy: "weekly",
    algorithm: "calendar",
    overrides: true,
    limit: 6,
    windowMs: LONGEST_PERIOD_MS.week,
    failMode: "open",
    period: {
      unit: "week",
      timezone: "Europe/Berlin",
      anchor: Date.parse("2030-03-17T02:30:00+01:00"),
    },
  },
  monthly: {
    policy: "monthly",
    algorithm: "calendar",
    overrides: true,
    limit: 5,
    windowMs: LONGEST_PERIOD_MS.month,
    failMode: "closed",
    period: { unit: "month", timezone: "UTC", anchor: Date.parse("2030-01-31T09:00:00Z") },
  },
  // Usage rules (docs/usage.md): a cost is a reservation (2, 4 or 6) a settle changes, once. On
  // the weighted log; in a month in Sydney from the 30th at 23:30 (February: its last day; DST
  // changes on its edges); in a fixed window (epoch-aligned). The last two keep one count per
  // window or period, and a settle charges only the one its request was counted in, while it
  // runs and within a day of the admission (usage-count-reference.ts).
  usage: {
    policy: "usage",
    algorithm: "sliding-log-weighted",
    limit: 12,
    windowMs: 10_000,
    failMode: "open",
    usage: true,
  },
  umonth: {
    policy: "umonth",
    algorithm: "calendar",
    limit: 12,
    windowMs: LONGEST_PERIOD_MS.month,
    failMode: "closed",
    usage: true,
    period: {
      unit: "month",
      timezone: "Australia/Sydney",
      anchor: Date.parse("2030-01-30T23:30:00+11:00"),
    },
  },
  ufixed: {
    policy: "ufixed",
    algorithm: "fixed-window",
    limit: 12,
    windowMs: 10_000,
    failMode: "open",
    usage: true,
  },
};

/** The feature that generates each policy's decisions (and every one of POLICY_MEETING's). */
const POLICY_FEATURE: Record<string, Feature> = {
  log: "sliding-log",
  ring: "sliding-log",
  plan: "sliding-log",
  lease: "leases",
  fixed: "fixed-window",
  counter: "sliding-counter",
  bucket: "token-bucket",
  conc: "concurrency",
  daily: "calendar",
  weekly: "calendar",
  monthly: "calendar",
  usage: "usage",
  umonth: "usage",
  ufixed: "usage",
};

/** A usage rule that counts in a period or a window: the algorithm and the meeting it needs. */
const POLICY_MEETING: Record<string, Feature[]> = {
  umonth: ["calendar", "usage×calendar"],
  ufixed: ["fixed-window", "usage×fixed-window"],
};

/** Whether a run with these features generates this policy's decisions. */
export function policyOn(features: ReadonlySet<Feature>, p: string): boolean {
  const needs = [POLICY_FEATURE[p] as Feature, ...(POLICY_MEETING[p] ?? [])];
  return needs.every((f) => features.has(f));
}

export interface RunConfig {
  reshard: boolean;
  /** `at`, from the run's start (ms). */
  atOffset: number;
  /**
   * How long after `at` isolate 0 still runs the old config (0: the premise kept; more: a
   * deploy that came late, which the limiter must refuse or stay within the limit across).
   */
  lateRedeployMs: number;
}

export interface Isolate {
  id: string;
  limiter: Limiter;
  oldConfig: boolean;
}

export interface IdRecord {
  id: string;
  seq: number;
  t: number;
  requests: { policy: Policy; key: string; cost: number }[];
  allowed: boolean;
  sources: string[];
  /** The shard each part was decided on. */
  shards: (string | undefined)[];
  refunded: boolean;
  slots: string[];
  /** A retry of it was denied: the id's record may replay that denial. */
  retryDenied?: true;
}

export class World {
  readonly ref: Reference;
  readonly keys: string[];
  readonly prefix = `model-${crypto.randomUUID()}`;
  readonly ids: IdRecord[] = [];
  readonly receipts: {
    receipt: import("../../../src/limiter/types").RefundReceipt;
    admissions: import("./reference").Admission[];
    id?: IdRecord;
  }[] = [];
  private readonly isolates = new Map<string, Isolate>();
  /** When each isolate's copy of the network blocks last failed to refresh (model time). */
  readonly refreshFailedAt = new Map<string, number>();
  private readonly copyOptions = new Map<string, NetworkBlocksOptions>();
  private clockNow = T0;
  readonly at: number | undefined;
  /** A new-config isolate's view of placement (shardOf), never used to decide. */
  readonly placement: Limiter;

  constructor(
    readonly stores: readonly ModelStore[],
    readonly cfg: RunConfig,
    readonly features: ReadonlySet<Feature>,
  ) {
    this.at = cfg.reshard ? T0 + cfg.atOffset : undefined;
    this.placement = this.build(false);
    const at = this.at;
    this.keys = this.pickKeys();
    this.ref = new Reference(
      T0,
      at === undefined
        ? undefined
        : {
            at,
            settleMs: TIMEOUT_MS,
            moved: (key) => this.placement.shardOf(key, at) !== this.placement.shardOf(key, at - 1),
          },
    );
    this.ref.sinceNewStart = !features.has("anchors") || features.has("anchor-mid-period");
    for (const store of stores) store.proxy.set("up");
  }

  now = () => this.clockNow;

  /** The instant, for a violation's message: from the run's start, and from `at`. */
  when(): string {
    const at =
      this.at === undefined
        ? ""
        : `, at${this.clockNow >= this.at ? "+" : ""}${this.clockNow - this.at}`;
    return `t=${this.clockNow - T0}${at}`;
  }

  advance(ms: number) {
    this.clockNow += ms;
    this.ref.now = this.clockNow;
  }

  on(feature: Feature): boolean {
    return this.features.has(feature);
  }

  /** Both features on, and their meeting unless this run lacks the first one's condition. */
  reshardAllows(feature: Feature): boolean {
    return !this.cfg.reshard || this.on(feature);
  }

  private build(oldConfig: boolean): Limiter {
    const clients: Record<string, StoreClient> = Object.fromEntries(
      this.stores.map((store) => [store.name, store.client(TIMEOUT_MS)]),
    );
    const common = {
      prefix: this.prefix,
      clock: "caller" as const,
      now: this.now,
      timeoutMs: TIMEOUT_MS,
      // The runs print nothing of their own: a breaker's change is not a finding.
      onBreakerChange: () => {},
    };
    if (this.at === undefined) return createLimiter({ ...common, store: clients });
    if (oldConfig)
      return createLimiter({
        ...common,
        store: { A: clients.A as StoreClient, B: clients.B as StoreClient },
      });
    return createLimiter({ ...common, store: clients, reshard: { from: ["A", "B"], at: this.at } });
  }

  /**
   * Four keys, each placed the same in every run (so a kept sequence replays on the same
   * shards whatever the run's prefix): k0 on A, k1 on B, k2 on C, k3 on A; in a run that
   * reshards (two shards become three), k0 moves from A to C, k1 stays on A, k2 moves from B
   * to C, k3 stays on B.
   */
  private pickKeys(): string[] {
    const at = this.at;
    const want: [string, string][] =
      at === undefined
        ? [
            ["A", "A"],
            ["B", "B"],
            ["C", "C"],
            ["A", "A"],
          ]
        : [
            ["A", "C"],
            ["A", "A"],
            ["B", "C"],
            ["B", "B"],
          ];
    const keys: string[] = [];
    for (let i = 0; keys.length < want.length; i++) {
      const key = `${this.prefix}-k${i}`;
      const before = this.placement.shardOf(key, at === undefined ? T0 : at - 1);
      const after = this.placement.shardOf(key, at ?? T0);
      const [from, to] = want[keys.length] as [string, string];
      if (before === from && after === to) keys.push(key);
    }
    return keys;
  }

  /** Isolate `i` (0..2) now: isolate 0 is redeployed on the new config at `at`. */
  isolate(i: number): Isolate {
    const redeployed =
      i === 0 && this.at !== undefined && this.clockNow >= this.at + this.cfg.lateRedeployMs;
    const id = redeployed ? "0r" : String(i);
    let isolate = this.isolates.get(id);
    if (!isolate) {
      const oldConfig = i === 0 && this.at !== undefined && !redeployed;
      isolate = { id, limiter: this.build(oldConfig), oldConfig };
      this.isolates.set(id, isolate);
    }
    return isolate;
  }

  /** One options object per isolate, so that it keeps one copy of the network blocks. */
  blocksOptions(id: string): NetworkBlocksOptions {
    let options = this.copyOptions.get(id);
    if (!options) {
      options = {
        refreshMs: BLOCKS_REFRESH_MS,
        onRefreshFailed: () => {
          this.refreshFailedAt.set(id, this.clockNow);
        },
      };
      this.copyOptions.set(id, options);
    }
    return options;
  }

  /** The isolate by id, if it still runs (isolate "0" is gone from `at` on). */
  isolateById(id: string): Isolate | undefined {
    if (id === "0" && this.at !== undefined && this.clockNow >= this.at + this.cfg.lateRedeployMs) {
      return undefined;
    }
    return this.isolates.get(id);
  }

  /** The shards a set of keys lives on now (the new config's view). */
  shardsOf(keys: readonly string[], t = this.clockNow): Set<string> {
    return new Set(keys.map((key) => this.placement.shardOf(key, t)));
  }

  async close() {
    for (const store of this.stores) store.proxy.set("up");
    await Promise.all([...this.isolates.values()].map((iso) => iso.limiter.endLeases()));
  }
}
