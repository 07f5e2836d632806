import { describe, expect, it } from "vitest";
import { type BlocksRefreshFailed, createNetworkBlocks } from "../../../src/net/network-blocks";
import {
  normalizeAsn,
  normalizeCountry,
  normalizeNetwork,
  parseNetwork,
} from "../../../src/net/network-values";
import { readNetworkBlocks } from "../../../src/store/plan-reads";
import { withinDeadline } from "../../../src/store/script-runner";
import { faultScenario, storeAt } from "../../support/worker/fault-control";
import { plansAdmin } from "../../support/worker/plans-admin";
import { scopedPrefix, testStore } from "../../support/worker/redis";

const prefix = scopedPrefix("network-blocks");
const store = testStore();

/** One isolate's copy on the real store, on a clock the test moves. */
function isolateCopy(own = prefix, refreshMs = 1_000) {
  let clock = Date.now();
  let loads = 0;
  const pending: Promise<unknown>[] = [];
  const blocks = createNetworkBlocks({
    load: () => {
      loads++;
      return readNetworkBlocks(store, own);
    },
    refreshMs,
    now: () => clock,
  });
  return {
    blocks,
    tick: (ms: number) => (clock += ms),
    loads: () => loads,
    settle: () => Promise.all(pending.splice(0)),
    waitUntil: (p: Promise<unknown>) => pending.push(p),
  };
}

describe("network block values", () => {
  it("normalizes addresses and CIDRs as the lookup spells them, and refuses the rest", () => {
    expect(normalizeNetwork("192.0.2.77/24")).toBe("192.0.2.0/24");
    expect(normalizeNetwork("192.0.2.77")).toBe("192.0.2.77");
    expect(normalizeNetwork("192.0.2.77/32")).toBe("192.0.2.77");
    expect(normalizeNetwork("2001:DB8:0:0::1/64")).toBe("2001:db8::/64");
    expect(normalizeNetwork("::ffff:192.0.2.1")).toBe("192.0.2.1");
    // An IPv4-mapped CIDR keeps its IPv6 length: /120 is the IPv4 /24, /24 is not IPv4 at all.
    expect(normalizeNetwork("::ffff:192.0.2.1/120")).toBe("192.0.2.0/24");
    expect(parseNetwork("::ffff:192.0.2.1/24")).toMatchObject({ ok: false });
    expect(parseNetwork("0.0.0.0/0")).toMatchObject({
      ok: false,
      detail: expect.stringContaining("/0"),
    });
    for (const bad of [
      "192.0.2.1/33",
      "2001:db8::/129",
      "192.0.2.1/",
      "192.0.2.1/08",
      "x",
      "1.2.3",
      "010.0.0.1",
      " 192.0.2.1",
      "2001:db8::1 ",
      "fe80::1%eth0",
      "[2001:db8::1]",
      "::/0",
    ]) {
      expect(normalizeNetwork(bad), bad).toBeUndefined();
    }
    expect(normalizeCountry("de")).toBe("DE");
    expect(normalizeCountry("DEU")).toBeUndefined();
    // Cloudflare's own values beside ISO 3166-1: unknown and Tor; "UK" is not a code (GB is).
    expect(["xx", "t1", "gb"].map(normalizeCountry)).toEqual(["XX", "T1", "GB"]);
    expect(["UK", "EL", "ZZ", "T2"].map(normalizeCountry)).toEqual([
      undefined,
      undefined,
      undefined,
      undefined,
    ]);
    expect(["AS13335", "as13335", 13_335].map(normalizeAsn)).toEqual(["13335", "13335", "13335"]);
    for (const bad of ["AS 13335", "013335", 0, "0", -1]) {
      expect(normalizeAsn(bad), String(bad)).toBeUndefined();
    }
    expect(normalizeAsn(13_335)).toBe("13335");
    expect(normalizeAsn("13335")).toBe("13335");
    expect(normalizeAsn(2 ** 32)).toBeUndefined();
    expect(normalizeAsn(1.5)).toBeUndefined();
  });
});

describe("an isolate's copy of the network blocks", () => {
  it("matches IPv4 and IPv6 prefixes of every length, countries and ASNs, per rule or for all", async () => {
    const own = scopedPrefix("network-blocks-match");
    await plansAdmin(store, own).networks.add({ by: "ip", value: "10.0.0.0/8" });
    await plansAdmin(store, own).networks.add({ by: "ip", value: "192.0.2.7" });
    await plansAdmin(store, own).networks.add({
      by: "ip",
      value: "2001:db8:ffff::/48",
      policy: "web",
    });
    await plansAdmin(store, own).networks.add({ by: "country", value: "KP" });
    await plansAdmin(store, own).networks.add({ by: "asn", value: "64496", policy: "api" });
    const { blocks } = isolateCopy(own);
    expect(await blocks.match({ ip: "10.200.3.4" }, ["api"])).toEqual({
      by: "ip",
      value: "10.0.0.0/8",
    });
    expect(await blocks.match({ ip: "192.0.2.7" }, ["api"])).toMatchObject({ value: "192.0.2.7" });
    expect(await blocks.match({ ip: "192.0.2.8" }, ["api"])).toBeUndefined();
    expect(await blocks.match({ ip: "::ffff:10.1.1.1" }, ["api"])).toMatchObject({ by: "ip" });
    expect(await blocks.match({ ip: "2001:db8:ffff:1::1" }, ["web"])).toEqual({
      by: "ip",
      value: "2001:db8:ffff::/48",
      rule: "web",
    });
    expect(await blocks.match({ ip: "2001:db8:ffff:1::1" }, ["api"])).toBeUndefined();
    expect(await blocks.match({ ip: "2001:db8:fffe::1" }, ["web"])).toBeUndefined();
    expect(await blocks.match({ country: "kp" }, ["api"])).toMatchObject({ by: "country" });
    expect(await blocks.match({ asn: 64_496 }, ["web"])).toBeUndefined();
    expect(await blocks.match({ asn: 64_496 }, ["web", "api"])).toMatchObject({
      by: "asn",
      rule: "api",
    });
    expect(blocks.size).toBe(5);
  });

  it("loads once; a copy older than refreshMs is refreshed before it decides", async () => {
    const own = scopedPrefix("network-blocks-refresh");
    const copy = isolateCopy(own, 1_000);
    const client = { ip: "198.51.100.1" };
    expect(await copy.blocks.match(client, ["api"], copy.waitUntil)).toBeUndefined();
    expect(copy.loads()).toBe(1);
    await plansAdmin(store, own).networks.add({ by: "ip", value: "198.51.100.0/24" });
    copy.tick(500);
    expect(await copy.blocks.match(client, ["api"], copy.waitUntil)).toBeUndefined();
    expect(copy.loads()).toBe(1);
    copy.tick(500);
    // At refreshMs the copy no longer decides: this very request waits for the refresh.
    expect(await copy.blocks.match(client, ["api"], copy.waitUntil)).toMatchObject({ by: "ip" });
    expect(copy.loads()).toBe(2);
    await plansAdmin(store, own).networks.remove({ by: "ip", value: "198.51.100.0/24" });
    copy.blocks.invalidate();
    expect(await copy.blocks.match(client, ["api"], copy.waitUntil)).toBeUndefined();
    expect(copy.loads()).toBe(3);
  });

  it("two isolates: a block set through one holds on the other's first request after a quiet spell", async () => {
    const own = scopedPrefix("network-blocks-idle");
    const one = isolateCopy(own, 1_000);
    const two = isolateCopy(own, 1_000);
    const client = { ip: "203.0.113.5" };
    expect(await two.blocks.match(client, ["api"], two.waitUntil)).toBeUndefined();
    // Through the first isolate: the store, then its own copy dropped (as the admin route does).
    await plansAdmin(store, own).networks.add({ by: "ip", value: "203.0.113.0/24" });
    one.blocks.invalidate();
    expect(await one.blocks.match(client, ["api"], one.waitUntil)).toMatchObject({ by: "ip" });
    // The second was idle for 1.5 s: its one request is decided on a fresh copy, not the old.
    two.tick(1_500);
    expect(await two.blocks.match(client, ["api"], two.waitUntil)).toEqual({
      by: "ip",
      value: "203.0.113.0/24",
    });
    expect(two.loads()).toBe(2);
  });

  it("a busy isolate refreshes shortly before refreshMs, off the request path", async () => {
    const own = scopedPrefix("network-blocks-busy");
    const copy = isolateCopy(own, 1_000);
    const client = { country: "CU" };
    await copy.blocks.match(client, ["api"], copy.waitUntil);
    await plansAdmin(store, own).networks.add({ by: "country", value: "CU" });
    copy.tick(899);
    await copy.blocks.match(client, ["api"], copy.waitUntil);
    expect(copy.loads()).toBe(1);
    copy.tick(1);
    // Within the last tenth: the refresh starts in the background; this request is the old copy's.
    expect(await copy.blocks.match(client, ["api"], copy.waitUntil)).toBeUndefined();
    expect(copy.loads()).toBe(2);
    await copy.settle();
    expect(await copy.blocks.match(client, ["api"], copy.waitUntil)).toMatchObject({
      by: "country",
    });
    // The refreshed copy is as old as that load's start: the next one comes 900 ms after it.
    copy.tick(899);
    await copy.blocks.match(client, ["api"], copy.waitUntil);
    expect(copy.loads()).toBe(2);
  });

  it("requests on a stale copy share one refresh", async () => {
    const own = scopedPrefix("network-blocks-flight");
    const copy = isolateCopy(own, 1_000);
    const client = { asn: 64_511 };
    await copy.blocks.match(client, ["api"]);
    await plansAdmin(store, own).networks.add({ by: "asn", value: "64511" });
    copy.tick(5_000);
    const answers = await Promise.all(
      Array.from({ length: 8 }, () => copy.blocks.match(client, ["api"], copy.waitUntil)),
    );
    expect(answers.every((hit) => hit?.by === "asn")).toBe(true);
    expect(copy.loads()).toBe(2);
  });

  it("a load started before an invalidation does not stand in for the one after it", async () => {
    const own = scopedPrefix("network-blocks-invalidate");
    let clock = 0;
    let loads = 0;
    let readDone = () => {};
    const read = new Promise<void>((resolve) => {
      readDone = resolve;
    });
    let release = () => {};
    const released = new Promise<void>((resolve) => {
      release = resolve;
    });
    const blocks = createNetworkBlocks({
      load: async () => {
        loads++;
        const blocksRead = await readNetworkBlocks(store, own);
        // The first load has read the store before the block below is written, and answers late.
        if (loads === 1) {
          readDone();
          await released;
        }
        return blocksRead;
      },
      refreshMs: 1_000,
      now: () => clock,
    });
    const first = blocks.match({ ip: "192.0.2.50" }, ["api"]);
    await read;
    await plansAdmin(store, own).networks.add({ by: "ip", value: "192.0.2.50" });
    blocks.invalidate();
    const second = blocks.match({ ip: "192.0.2.50" }, ["api"]);
    release();
    await first;
    expect(await second).toMatchObject({ by: "ip", value: "192.0.2.50" });
    expect(loads).toBe(2);
    // Whichever answered last, the copy kept is the one read after the change.
    clock += 1;
    expect(await blocks.match({ ip: "192.0.2.50" }, ["api"])).toMatchObject({ by: "ip" });
    expect(loads).toBe(2);
  });

  it("a block with an end stops matching at its end, on the isolate's clock", async () => {
    const own = scopedPrefix("network-blocks-end");
    await plansAdmin(store, own).networks.add({ by: "country", value: "XX", seconds: 60 });
    const copy = isolateCopy(own, 3_600_000);
    const hit = await copy.blocks.match({ country: "XX" }, ["api"]);
    expect(hit?.until).toBeGreaterThan(Date.now() + 50_000);
    copy.tick(61_000);
    expect(await copy.blocks.match({ country: "XX" }, ["api"])).toBeUndefined();
  });

  it("a store that fails to load blocks nothing, and is asked again after refreshMs", async () => {
    let clock = 0;
    let loads = 0;
    const failures: BlocksRefreshFailed[] = [];
    const blocks = createNetworkBlocks({
      load: () => {
        loads++;
        return Promise.reject(new Error("store down"));
      },
      refreshMs: 1_000,
      now: () => clock,
      onRefreshFailed: (event) => failures.push(event),
    });
    expect(await blocks.match({ ip: "192.0.2.1" }, ["api"])).toBeUndefined();
    expect(await blocks.match({ ip: "192.0.2.1" }, ["api"])).toBeUndefined();
    expect(loads).toBe(1);
    expect(failures).toEqual([{ event: "network-blocks-refresh-failed", detail: "store down" }]);
    clock += 1_000;
    await blocks.match({ ip: "192.0.2.1" }, ["api"]);
    expect(loads).toBe(2);
  });

  it("a refresh the store does not answer within the timeout: the old copy decides, warned", async () => {
    const own = scopedPrefix("network-blocks-hang");
    await plansAdmin(store, own).networks.add({ by: "ip", value: "192.0.2.0/28" });
    const scenario = await faultScenario("forward");
    const faulty = storeAt(scenario.url, 10_000);
    let clock = 0;
    let loads = 0;
    const failures: BlocksRefreshFailed[] = [];
    const blocks = createNetworkBlocks({
      load: () => {
        loads++;
        return withinDeadline(faulty, 150, (client) => readNetworkBlocks(client, own));
      },
      refreshMs: 1_000,
      now: () => clock,
      onRefreshFailed: (event) => failures.push(event),
    });
    const client = { ip: "192.0.2.3" };
    expect(await blocks.match(client, ["api"])).toMatchObject({ by: "ip" });
    await plansAdmin(store, own).networks.remove({ by: "ip", value: "192.0.2.0/28" });
    await scenario.set("hang");
    clock += 2_000;
    // The refresh hangs: the request waits for it (up to the timeout), then the copy it had decides.
    expect(await blocks.match(client, ["api"])).toMatchObject({ by: "ip" });
    expect(loads).toBe(2);
    expect(failures).toEqual([
      expect.objectContaining({ event: "network-blocks-refresh-failed", ageMs: 2_000 }),
    ]);
    // Within refreshMs of that attempt nobody waits again; after it, the store answers again.
    clock += 999;
    expect(await blocks.match(client, ["api"])).toMatchObject({ by: "ip" });
    expect(loads).toBe(2);
    await scenario.set("forward");
    clock += 1;
    expect(await blocks.match(client, ["api"])).toBeUndefined();
    expect(loads).toBe(3);
  });
});
