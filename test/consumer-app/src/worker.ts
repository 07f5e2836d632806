// The scratch app as a Worker module: one app per isolate, built from the bindings on the first
// request (they exist only inside one).
import { createApp } from "./app.js";

interface Bindings {
  UPSTASH_REDIS_REST_URL: string;
  UPSTASH_REDIS_REST_TOKEN: string;
  LIMITER_PREFIX: string;
}

let app: ReturnType<typeof createApp> | undefined;

export default {
  fetch(request: Request, env: Bindings): Response | Promise<Response> {
    app ??= createApp({
      url: env.UPSTASH_REDIS_REST_URL,
      token: env.UPSTASH_REDIS_REST_TOKEN,
      prefix: env.LIMITER_PREFIX,
    });
    return app.fetch(request);
  },
};
