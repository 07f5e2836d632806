/**
 * A model-based test of every feature at once (test/e2e/model/): seeded random sequences of
 * decisions of every algorithm with costs, concurrency acquire/release, calendar quotas (a day,
 * a week and a month in three zones, clock steps to their edges: month ends, DST changes), usage
 * rules and their settles (on the weighted log, in a month and in a fixed window: the settle
 * charges only the window or period its request was counted in), request ids and retries, refunds,
 * peeks of every rule (a log's answer against the check right after it; a calendar or usage
 * rule's: not peeked, nothing counted), resets, overrides, a calendar key's own anchor (an
 * override's, set and removed: the reference's periods follow it), key and network blocks,
 * leases, a reshard instant (old and new configs side by side), a store that goes down or hangs,
 * and clock steps (to a rule's or a key's own period edges too) — the library over
 * three private redis-servers, each behind the REST bridge and a fault proxy, with the real
 * @upstash/redis client on a manual clock (the caller clock). The reference model checks the
 * promises (reference.ts); fast-check shrinks a failing sequence.
 *
 * Not generated: regional leases (their proof needs the region's clock to advance at the rate of
 * home's, docs/regions.md, which a manual clock that jumps cannot give); a usage rule's own anchor
 * (the calendar usage rule's periods are the rule's: usage-count-reference.ts does not follow an
 * override's); calendar rules and their anchors in a run that reshards (the config refuses them).
 *
 * MODEL_SEED, MODEL_RUNS, MODEL_STEPS change the run; MODEL_OFF / MODEL_ON / MODEL_ONLY the
 * features (features.ts). MODEL_REPORT=<file> writes the figures as JSON (`npm run fuzz` reads
 * them). A failing seed's shrunk sequence (the fuzz prints it as a `keep:` line) goes in
 * model/kept-seeds.json with the features it needs: each is replayed here, as its steps' text,
 * once those features are on (skipped while one is in KNOWN_BROKEN).
 */
import { writeFileSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { enabledFeatures, type Feature } from "./model/features";
import kept from "./model/kept-seeds.json" with { type: "json" };
import { type KeptCase, type ModelRunReport, replayKept, runModel } from "./model/run-model";
import { type ModelStore, startModelStores } from "./model/stores";
import { SHARDS } from "./model/world";

const DEFAULT_SEED = 42_042;
const seed = Number(process.env.MODEL_SEED ?? DEFAULT_SEED);
const numRuns = Number(process.env.MODEL_RUNS ?? 100);
const maxCommands = Number(process.env.MODEL_STEPS ?? 50);

/** A shrunk failing sequence kept as a regular test (the fuzz prints each as a `keep:` line). */
interface KeptSeed extends KeptCase {
  /** Features it needs on (it is skipped while any is switched off, e.g. still KNOWN_BROKEN). */
  needs?: Feature[];
  /** The property it broke, and where. */
  note: string;
}

let stores: ModelStore[] = [];
let stop = async () => {};

beforeAll(async () => {
  ({ stores, stop } = await startModelStores(SHARDS));
}, 60_000);

afterAll(async () => {
  await stop();
});

function explain(report: ModelRunReport): string {
  return [
    `model violation (${report.property}) with MODEL_SEED=${report.seed}`,
    report.message,
    `shrunk: ${JSON.stringify({ config: report.config, steps: report.steps })}`,
  ].join("\n");
}

describe("every feature at once, against the reference model", () => {
  it(`holds every promise (seed ${seed}, ${numRuns} runs of ≤ ${maxCommands} steps)`, async () => {
    const features = enabledFeatures();
    const report = await runModel(stores, { seed, numRuns, maxCommands, features });
    if (process.env.MODEL_REPORT) {
      writeFileSync(
        process.env.MODEL_REPORT,
        JSON.stringify({ ...report, features: [...features] }),
      );
    }
    console.log(
      `model: seed ${seed}, ${report.numRuns} runs, ${report.operations} operations, ${report.failed ? 1 : 0} violations`,
    );
    expect(report.failed, report.failed ? explain(report) : "").toBe(false);
  }, 600_000);

  const all = enabledFeatures();
  for (const entry of kept as KeptSeed[]) {
    const off = (entry.needs ?? []).filter((f) => !all.has(f));
    it.skipIf(off.length > 0)(
      `kept seed ${entry.seed}: ${entry.note}`,
      async () => {
        const report = await replayKept(stores, entry, all);
        expect(report.failed, report.failed ? explain(report) : "").toBe(false);
      },
      600_000,
    );
  }
});
