// Runs the compiled scratch app (out/app.js) in Bun, served by Bun.serve, against the store
// named on the command line. Prints what came back as one JSON line.
//   bun run-bun.mjs <store url> <store token> <key prefix>
import { createApp } from "./out/app.js";
import { fourEach } from "./serve-check.mjs";

const [url = "", token = "", prefix = ""] = process.argv.slice(2);
const app = createApp({ url, token, prefix });
// @ts-expect-error: Bun's global
const server = Bun.serve({ fetch: app.fetch, port: 0, hostname: "127.0.0.1" });
const result = await fourEach(`http://127.0.0.1:${server.port}`);
server.stop(true);
console.log(JSON.stringify({ runtime: `bun ${Bun.version}`, ...result }));
