import { Hono } from "hono";

const app = new Hono();
app.get("/", (c) => c.text("edge-limiter"));
export default app;
