/**
 * Concurrency slots held for as long as their request is in flight (docs/concurrency.md): until
 * the response body has been delivered, or the client went away (the body was cancelled), or the
 * body failed (the origin broke off). The proxy and the middleware both answer through
 * runLimited, which wraps the response here; the release itself runs off the request path.
 */
/**
 * The response, its body wrapped so that the slots are released exactly once, when the body
 * ends, is cancelled, or errors; a response without a body releases them at once. Status and
 * headers carry over; chunks pass through as they come (nothing is buffered).
 */
export function releasingAtEnd(response: Response, release: () => void): Response {
  const body = response.body;
  if (!body) {
    release();
    return response;
  }
  let ended = false;
  const end = () => {
    if (ended) return;
    ended = true;
    release();
  };
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
