import { describe, expect, it } from "vitest";
import { type ClockRun, clockRunOf, storeClockOf, withClock } from "../../../src/store/store-clock";

const runFor = (store: object): ClockRun => ({
  state: storeClockOf(store),
  caller: false,
  now: () => 42,
});

describe("withClock", () => {
  it("a plain client (withinDeadline's): a copy carrying the run, its calls the client's, the client untouched", async () => {
    const sent: string[] = [];
    const client = {
      evalsha: (sha: string) => {
        sent.push(`evalsha ${sha}`);
        return Promise.resolve(1);
      },
      eval: (script: string) => {
        sent.push(`eval ${script}`);
        return Promise.resolve(2);
      },
    };
    const run = runFor(client);
    const clocked = withClock(client, run);
    expect(clockRunOf(clocked)).toBe(run);
    expect(await clocked.evalsha("abc")).toBe(1);
    expect(await clocked.eval("return 2")).toBe(2);
    expect(sent).toEqual(["evalsha abc", "eval return 2"]);
    expect("clock" in client).toBe(false);
    expect(withClock(clocked, run)).toBe(clocked);
  });

  it("a client of a class (the Upstash client): a delegate carrying the run, reading the client's methods and state", async () => {
    class Client {
      url = "https://first";
      evalsha(): Promise<string> {
        return Promise.resolve(this.url);
      }
    }
    const client = new Client();
    const run = runFor(client);
    const clocked = withClock(client, run);
    expect(clockRunOf(clocked)).toBe(run);
    expect(clocked).toBeInstanceOf(Client);
    client.url = "https://second";
    expect(await clocked.evalsha()).toBe("https://second");
    expect(clockRunOf(client)).not.toBe(run);
  });
});
