import { describe, expect, it } from "vitest";
import { type BreakerEvent, createCircuitBreaker } from "../../../src/limiter/circuit-breaker";
import { manualClock } from "../../support/worker/fault-control";

function breaker(extra = {}) {
  const clock = manualClock();
  const events: BreakerEvent[] = [];
  const instance = createCircuitBreaker({
    failureThreshold: 1,
    cooldownMs: 1_000,
    probeTimeoutMs: 500,
    now: clock.now,
    onStateChange: (event) => events.push(event),
    ...extra,
  });
  return { breaker: instance, clock, events };
}

describe("circuit breaker: a probe that never reports", () => {
  it("frees its permit at its deadline: the next caller probes, and its answer closes the breaker", () => {
    const { breaker: b, clock } = breaker();
    b.failure(b.acquire(), new Error("down"));
    expect(b.state).toBe("open");
    clock.advance(1_000);
    const lost = b.acquire();
    expect(typeof lost).toBe("object");
    expect(b.state).toBe("half-open");
    // Its request was cancelled: it never reports. Until the deadline, nobody else probes…
    clock.advance(499);
    expect(b.acquire()).toBe("skip");
    // …after it, one caller does.
    clock.advance(1);
    const next = b.acquire();
    expect(typeof next).toBe("object");
    expect(next).not.toBe(lost);
    expect(b.acquire()).toBe("skip");
    b.success(next);
    expect(b.state).toBe("closed");
    expect(b.acquire()).toBe("call");
  });

  it("ignores the lost probe's late report", () => {
    const { breaker: b, clock } = breaker();
    b.failure(b.acquire(), new Error("down"));
    clock.advance(1_000);
    const lost = b.acquire();
    clock.advance(500);
    const next = b.acquire();
    b.failure(lost, new Error("late"));
    expect(b.state).toBe("half-open");
    b.success(next);
    expect(b.state).toBe("closed");
  });

  it("a released probe (nothing learnt) lets the next caller probe at once, with no cool-down", () => {
    const { breaker: b, clock, events } = breaker();
    b.failure(b.acquire(), new Error("down"));
    clock.advance(1_000);
    const probe = b.acquire();
    b.release(probe);
    const next = b.acquire();
    expect(typeof next).toBe("object");
    b.success(next);
    expect(events.map((e) => e.to)).toEqual(["open", "half-open", "closed"]);
  });

  it("release of an ordinary call counts neither way", () => {
    const { breaker: b } = breaker({ failureThreshold: 2 });
    b.failure(b.acquire(), new Error("one"));
    b.release(b.acquire());
    expect(b.state).toBe("closed");
    b.failure(b.acquire(), new Error("two"));
    expect(b.state).toBe("open");
  });
});
