/**
 * Concurrency slots held for as long as their request is in flight (docs/concurrency.md): until
 * the response body has been delivered, or the client went away, or the body failed (the origin
 * broke off). The proxy and the middleware both answer through runLimited, which wraps the
 * response here; the release itself runs off the request path.
 *
 * How a client's going away is seen depends on the runtime. workerd (1.20260426, served alone as
 * the bench serves it) never calls the `cancel` of a body stream made in JavaScript when its
 * client drops; it drops the request's context instead, and the slot lapsed at its timeout.
 * What it does do: error the writable side of a body it pumps natively, when a write to the
 * client fails (so there the body is piped through an IdentityTransformStream, and the pipe's
 * rejection is the release); and, with the `enable_request_signal` compatibility flag, abort the
 * request's signal for the drops it sees on the connection itself (the pipe takes that signal,
 * so the abort ends it at once, the origin's answer cancelled with it). The two catch different
 * drops: measured with a client that destroys its socket, one or the other fires, never neither.
 * Elsewhere (Node, Bun, Deno) the body is wrapped in a ReadableStream whose `cancel` the server
 * calls, and the request's signal, which those servers abort, ends it too.
 */
import type { WaitUntil } from "../limiter/types";

/**
 * A release that keeps the request's context alive until the slots are back: the returned
 * closure gives them back (once: later calls do nothing), and with a `waitUntil` the context is
 * held from now until that release has settled, whichever path called it.
 *
 * Why from now, before the response is handed over: once it has been, only a pending
 * `waitUntil` keeps the request's context alive. When the client disconnects without one,
 * workerd tears the context down at once: the body's pipe never settles, no release runs, and
 * the slot lapses at its timeout. The promise settles on the normal path too (the body ended,
 * the handler threw), so nothing is held past the release. A body nothing ever reads nor cancels
 * leaves it pending, which the runtime bounds (a deployed worker's waitUntil ends 30 s after the
 * response) rather than a timer of ours, which would hold the context until the slot's timeout.
 */
export function heldUntilReleased(
  release: () => Promise<unknown>,
  waitUntil: WaitUntil | undefined,
): () => void {
  let settle: () => void = () => {};
  if (waitUntil) waitUntil(new Promise<void>((resolve) => (settle = resolve)));
  let released = false;
  return () => {
    if (released) return;
    released = true;
    release().then(settle, settle);
  };
}

/** A byte pipe the runtime pumps to the client itself, whose writable side errors on disconnect. */
type NativePipe = new () => { readable: ReadableStream<Uint8Array>; writable: WritableStream };

/**
 * The response, its body wrapped so that `release` runs once, when the body ends, is cancelled,
 * or errors, or when `signal` (the incoming request's) aborts; a response without a body, or
 * whose client is already gone, releases at once. Status and headers carry over; chunks pass
 * through as they come (nothing is buffered).
 */
export function releasingAtEnd(
  response: Response,
  release: () => void,
  signal?: AbortSignal | undefined,
): Response {
  const body = response.body;
  if (!body || signal?.aborted) {
    release();
    return response;
  }
  // Read per call: cheap, and a test may run in either runtime.
  const Native = (globalThis as { IdentityTransformStream?: NativePipe }).IdentityTransformStream;
  if (Native) {
    // No buffer of its own: the pipe resolves once the last chunk has been taken by the client's
    // connection, and rejects when the body failed, when the signal aborts, or at the first write
    // after the readable side was cancelled or its client went away (an idle body is not
    // interrupted: a cancel is seen at the producer's next chunk or its end).
    const { readable, writable } = new Native();
    body.pipeTo(writable, signal ? { signal } : {}).then(release, release);
    return new Response(readable, response);
  }
  let ended = false;
  const reader = body.getReader();
  const end = () => {
    if (ended) return;
    ended = true;
    signal?.removeEventListener("abort", gone);
    release();
  };
  const gone = () => {
    end();
    reader.cancel(signal?.reason).catch(() => {});
  };
  signal?.addEventListener("abort", gone);
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
