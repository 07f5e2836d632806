/** The store did not answer within the decision's deadline. */
export class StoreTimeoutError extends Error {
  override name = "StoreTimeoutError";
  constructor(timeoutMs: number) {
    super(`store did not answer within ${timeoutMs} ms`);
  }
}

/**
 * Runs `work` and rejects with StoreTimeoutError after `timeoutMs`, whatever `work` does. The
 * HTTP request itself is aborted by the store client's own signal; this bounds the decision as a
 * whole, and `expired()` tells `work` not to start anything new once it is over.
 */
export function withDeadline<T>(
  timeoutMs: number,
  work: (expired: () => boolean) => Promise<T>,
): Promise<T> {
  let expired = false;
  let timer: ReturnType<typeof setTimeout> | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      expired = true;
      reject(new StoreTimeoutError(timeoutMs));
    }, timeoutMs);
  });
  return Promise.race([work(() => expired), deadline]).finally(() => {
    if (timer !== undefined) clearTimeout(timer);
  });
}
