/**
 * Concurrency slots held for as long as their request is in flight (docs/concurrency.md): until
 * the response body has been delivered, or the client went away, or the body failed (the origin
 * broke off). The proxy and the middleware both answer through runLimited, which wraps the
 * response here; the release itself runs off the request path.
 */
import type { WaitUntil } from "../limiter/types";

/** How a surface learns that its client went away before the body was delivered. */
export interface ClientWatch {
  /**
   * The incoming request's signal. workerd aborts it when the client disconnects only with the
   * `enable_request_signal` compatibility flag; Bun, Deno and @hono/node-server abort it too.
   */
  signal?: AbortSignal | undefined;
  /** Keeps the isolate alive until the body ends or the client goes (`ctx.waitUntil`). */
  waitUntil?: WaitUntil | undefined;
}

/** workerd's native pass-through stream (absent on other runtimes). */
type IdentityTransform = new () => {
  readable: ReadableStream<Uint8Array>;
  writable: WritableStream<Uint8Array>;
};

/**
 * The response, its body wrapped so that the slots are released exactly once, when the body
 * ends, is cancelled, or errors, or when the client's signal aborts; a response without a body,
 * or one whose client is already gone, releases them at once. Status and headers carry over;
 * chunks pass through as they come (nothing is buffered).
 */
export function releasingAtEnd(
  response: Response,
  release: () => void,
  client: ClientWatch = {},
): Response {
  const body = response.body;
  const { signal, waitUntil } = client;
  if (!body || signal?.aborted) {
    release();
    return response;
  }
  let ended = false;
  const end = () => {
    if (ended) return;
    ended = true;
    signal?.removeEventListener("abort", end);
    release();
  };
  signal?.addEventListener("abort", end);
  const Identity = (globalThis as { IdentityTransformStream?: IdentityTransform })
    .IdentityTransformStream;
  if (Identity) {
    // workerd: when writing to a client that went away fails, it neither cancels a body stream
    // made in JS nor aborts the request's signal (that comes only for some disconnects, and only
    // with `enable_request_signal`); it drops the request's context. A pipe into its native
    // stream is told: the pipe rejects once the client is gone. waitUntil keeps the pipe, and so
    // the release, alive past the response.
    const { readable, writable } = new Identity();
    const piped = body.pipeTo(writable).then(end, end);
    waitUntil?.(piped);
    return new Response(readable, response);
  }
  const reader = body.getReader();
  const wrapped = new ReadableStream<Uint8Array>({
    async pull(controller) {
      let read: ReadableStreamReadResult<Uint8Array>;
      try {
        read = await reader.read();
      } catch (error) {
        end();
        controller.error(error);
        return;
      }
      if (read.done) {
        end();
        controller.close();
      } else {
        controller.enqueue(read.value);
      }
    },
    cancel(reason) {
      end();
      return reader.cancel(reason);
    },
  });
  return new Response(wrapped, response);
}
