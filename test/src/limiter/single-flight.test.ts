import { describe, expect, it } from "vitest";
import { createSingleFlight } from "../../../src/limiter/single-flight";
import { manualClock } from "../../support/worker/fault-control";

// A flight whose owner was cancelled: in workerd its timers and fetch are gone, so it never settles.
const never = () => new Promise<boolean>(() => {});

describe("single flight", () => {
  it("a follower gets the flight's answer", async () => {
    const flights = createSingleFlight({ timeoutMs: 1_000 });
    let answer: (value: boolean) => void = () => {};
    flights.lead("k", new Promise<boolean>((resolve) => (answer = resolve)));
    const follower = flights.follow("k");
    answer(true);
    expect(await follower).toBe(true);
    await Promise.resolve();
    expect(flights.size).toBe(0);
  });

  it("a lost flight releases its followers at the deadline and leaves the map", async () => {
    const flights = createSingleFlight({ timeoutMs: 20 });
    flights.lead("k", never());
    expect(flights.size).toBe(1);
    // Released (false: the store did not answer in time) by the follower's own timer.
    expect(await flights.follow("k")).toBe(false);
    expect(flights.size).toBe(0);
    expect(flights.follow("k")).toBeUndefined();
  });

  it("a lost flight past its deadline is dropped when next looked at (the key is not wedged)", () => {
    const clock = manualClock();
    const flights = createSingleFlight({ timeoutMs: 500, now: clock.now });
    flights.lead("k", never());
    clock.advance(500);
    expect(flights.follow("k")).toBeUndefined();
    expect(flights.size).toBe(0);
    // A new leader can fly.
    flights.lead("k", Promise.resolve(true));
    expect(flights.follow("k")).toBeInstanceOf(Promise);
  });
});
