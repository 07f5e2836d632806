import { describe, expect, it } from "vitest";
import { StoreTimeoutError, withDeadline } from "../../../src/store/with-deadline";

describe("withDeadline", () => {
  it("turns work that throws synchronously into a rejection (and clears its timer)", async () => {
    let outcome: unknown;
    try {
      outcome = withDeadline(20, () => {
        throw new Error("boom");
      });
    } catch (error) {
      outcome = error;
    }
    // A promise, not a synchronous throw: callers `await` it inside their own error handling.
    expect(outcome).toBeInstanceOf(Promise);
    await expect(outcome).rejects.toThrow("boom");
    // Past the deadline: a timer left running would now reject unhandled (vitest fails the run).
    await new Promise((resolve) => setTimeout(resolve, 40));
  });

  it("rejects with StoreTimeoutError at the deadline, and tells work how much time is left", async () => {
    let left = -1;
    const hung = withDeadline(30, (deadline) => {
      left = deadline.remainingMs();
      return new Promise<never>(() => {});
    });
    await expect(hung).rejects.toBeInstanceOf(StoreTimeoutError);
    expect(left).toBeGreaterThan(0);
    expect(left).toBeLessThanOrEqual(30);
  });
  it("aborts its signal at the deadline (one timer for the decision and its requests), not before", async () => {
    let signal: AbortSignal | undefined;
    const hung = withDeadline(30, (deadline) => {
      signal = deadline.signal;
      return new Promise<never>(() => {});
    });
    expect(signal?.aborted).toBe(false);
    await expect(hung).rejects.toBeInstanceOf(StoreTimeoutError);
    expect(signal?.aborted).toBe(true);
    expect(signal?.reason).toBeInstanceOf(StoreTimeoutError);
    // Work that settles in time leaves its signal alone (the timer is cleared).
    let kept: AbortSignal | undefined;
    await withDeadline(20, async (deadline) => {
      kept = deadline.signal;
    });
    await new Promise((resolve) => setTimeout(resolve, 40));
    expect(kept?.aborted).toBe(false);
  });
});
