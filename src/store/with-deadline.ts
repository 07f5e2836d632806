/**
 * A deadline for one decision's store calls (used by withinDeadline in script-runner.ts): a timer
 * that rejects, and what the calls are told about the time left. Imports nothing.
 */

/** The store did not answer within the decision's deadline. */
export class StoreTimeoutError extends Error {
  override name = "StoreTimeoutError";
  constructor(timeoutMs: number) {
    super(`store did not answer within ${timeoutMs} ms`);
  }
}

/** What `work` is told about its deadline. */
export interface Deadline {
  /** The deadline has passed: start nothing new. */
  expired(): boolean;
  /** Milliseconds left (≤ 0 once expired): the most a request started now may take. */
  remainingMs(): number;
}

/**
 * Runs `work` and rejects with StoreTimeoutError after `timeoutMs`, whatever `work` does. The
 * HTTP request itself is aborted by the store client's own signal; this bounds the decision as a
 * whole, and `deadline` tells `work` not to start anything new once it is over, or how long
 * something started now may take.
 */
export function withDeadline<T>(
  timeoutMs: number,
  work: (deadline: Deadline) => Promise<T>,
): Promise<T> {
  // Date.now, not the limiter's injectable clock: the timer below runs on real time too.
  const endsAt = Date.now() + timeoutMs;
  let expired = false;
  let timer: ReturnType<typeof setTimeout> | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      expired = true;
      reject(new StoreTimeoutError(timeoutMs));
    }, timeoutMs);
  });
  const state: Deadline = {
    expired: () => expired,
    remainingMs: () => (expired ? 0 : endsAt - Date.now()),
  };
  // Through a promise: work that throws synchronously rejects like any other failure, and the
  // timer is still cleared (else `deadline` would reject later with nobody listening).
  const done = Promise.resolve().then(() => work(state));
  return Promise.race([done, deadline]).finally(() => {
    if (timer !== undefined) clearTimeout(timer);
  });
}
