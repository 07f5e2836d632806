// Runs the compiled scratch app (out/app.js) in Node against the store named on the command
// line: four requests with app.request(), four over HTTP through @hono/node-server, two to the
// createLimiter route, one to no route (the server entry's problem+json). Prints what came back
// as one JSON line.
//   node run-node.mjs <store url> <store token> <key prefix>
import { serve } from "@hono/node-server";
import { createApp } from "./out/app.js";
import { fourEach, summary } from "./serve-check.mjs";

const [url = "", token = "", prefix = ""] = process.argv.slice(2);
const app = createApp({ url, token, prefix });

const viaRequest = [];
for (let i = 0; i < 4; i += 1) {
  viaRequest.push(
    await summary(await app.request("/api/hello", { headers: { "X-User-Id": "a" } })),
  );
}

const direct = [];
for (let i = 0; i < 2; i += 1) direct.push(await summary(await app.request("/direct?key=a")));
const notFound = await summary(await app.request("/nowhere"));

/** @type {import("node:http").Server} */
const server = await new Promise((resolve) => {
  const started = serve({ fetch: app.fetch, port: 0, hostname: "127.0.0.1" }, () =>
    resolve(/** @type {import("node:http").Server} */ (started)),
  );
});
const address = server.address();
const port = typeof address === "object" && address !== null ? address.port : 0;
const { viaServer, viaIp } = await fourEach(`http://127.0.0.1:${port}`);
await new Promise((resolve) => server.close(resolve));

console.log(JSON.stringify({ viaRequest, direct, notFound, viaServer, viaIp }));
