import { Hono } from "hono";
import type { Env } from "./env";
import { checkHandler } from "./http/check-route";
import { problem } from "./http/problem";

const app = new Hono<{ Bindings: Env }>();

app.post("/check", checkHandler);
app.get("/", (c) => c.text("edge-limiter"));

app.notFound((c) =>
  problem(c, 404, { title: "Not Found", detail: `${c.req.method} ${c.req.path}` }),
);
// The limiter never throws on a store failure; this only catches our own bugs, as problem+json.
app.onError((error, c) => {
  console.error(JSON.stringify({ event: "unhandled-error", error: String(error) }));
  return problem(c, 500, { title: "Internal Server Error" });
});

export type { Env };
export default app;
