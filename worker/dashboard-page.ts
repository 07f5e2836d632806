/**
 * The dashboard's one HTML page: no external script, style, font or image (the worker must not
 * depend on a CDN; its Content-Security-Policy forbids any). Its script reads GET /check/stats
 * every 10 s (the browser re-sends the Basic credentials it logged in with) and draws, per
 * rule, allowed vs denied per minute as an inline SVG chart, how decisions were made, and the
 * top denied client keys; a usage rule's units charged and top spenders (dashboard-usage.ts);
 * and this isolate's breaker (each shard's, when sharded). Every value goes in with textContent or
 * an SVG attribute, never as HTML: client keys are attacker-chosen.
 */
import { DASHBOARD_CSS } from "./dashboard-style";
import { USAGE_SCRIPT } from "./dashboard-usage";

export const DASHBOARD_HTML = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>edge-limiter dashboard</title>
<style>
${DASHBOARD_CSS}</style>
</head>
<body>
<header>
  <h1>edge-limiter</h1>
  <span class="meta">last hour, per minute · refreshes every 10 s</span>
  <span class="meta">breaker (this isolate): <span id="breaker" class="badge">…</span></span>
  <span class="meta" id="status">loading…</span>
  <label class="meta">find a client:
    <input id="find" type="search" placeholder="an API key, a user id, an address"
      title="Header rules count a key by its SHA-256: what you type is hashed here, in the page, and matched both ways">
  </label>
  <span class="meta" id="found"></span>
</header>
<section id="shards" class="card" hidden></section>
<main id="rules"></main>
<section id="plans" class="card"><h2>Plans</h2><div class="empty">loading…</div></section>
<script>
(() => {
  const SOURCES = [["redis", "#1565c0"], ["cache", "#ef6c00"], ["fallback", "#8d6e63"], ["fail-open", "#9e9d24"], ["fail-closed", "#c62828"], ["lease", "#00838f"], ["region", "#6a1b9a"], ["block", "#000000"]];
  const SVG = "http://www.w3.org/2000/svg";
  const el = (tag, attrs = {}, text) => {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
    if (text !== undefined) node.textContent = String(text);
    return node;
  };
  const svgEl = (tag, attrs = {}) => {
    const node = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
    return node;
  };
  const time = (ms) => new Date(ms).toISOString().slice(11, 16);

  function chart(rule) {
    const W = 600, H = 150, left = 36, bottom = 18, top = 6;
    const minutes = rule.minutes;
    const denied = (m) => m.denied + m.shadowDenied;
    // An even top, at least 2: the half-way line is a whole number too (never "1, 1, 0").
    const top0 = Math.max(2, ...minutes.map((m) => m.allowed + denied(m)));
    const max = Math.ceil(top0 / 2) * 2;
    const svg = svgEl("svg", { viewBox: "0 0 " + W + " " + H, role: "img", "aria-label": rule.rule + " allowed and denied per minute" });
    const plotH = H - bottom - top, step = (W - left) / Math.max(1, minutes.length), barW = Math.max(1, step - 1);
    for (const frac of [0, 0.5, 1]) {
      const y = top + plotH * (1 - frac);
      svg.append(svgEl("line", { x1: left, x2: W, y1: y, y2: y, stroke: "#e0e0e0" }));
      const label = svgEl("text", { x: left - 4, y: y + 4, "text-anchor": "end", "font-size": 10, fill: "#666" });
      label.textContent = String(max * frac);
      svg.append(label);
    }
    minutes.forEach((m, i) => {
      const x = left + i * step;
      const hA = (m.allowed / max) * plotH, hD = (denied(m) / max) * plotH;
      if (hA > 0) svg.append(svgEl("rect", { x, width: barW, y: top + plotH - hA, height: hA, fill: "#2e7d32", class: "bar-allowed" }));
      if (hD > 0) svg.append(svgEl("rect", { x, width: barW, y: top + plotH - hA - hD, height: hD, fill: rule.shadow ? "#6a1b9a" : "#c62828", class: "bar-denied" }));
    });
    const ticks = [[0, "start"], [Math.floor(minutes.length / 2), "middle"], [minutes.length - 1, "end"]];
    for (const [i, anchor] of ticks) {
      const m = minutes[i];
      if (!m) continue;
      const x = anchor === "end" ? W : left + i * step;
      const label = svgEl("text", { x, y: H - 4, "font-size": 10, fill: "#666", "text-anchor": anchor });
      label.textContent = time(m.minute);
      svg.append(label);
    }
    return svg;
  }

  function sourcesBar(rule) {
    const total = SOURCES.reduce((sum, [s]) => sum + (rule.totals.sources[s] || 0), 0);
    const wrap = el("div", { class: "sources" });
    const svg = svgEl("svg", { viewBox: "0 0 600 16", role: "img", "aria-label": "decision sources" });
    let x = 0;
    const legend = el("div", { class: "legend" });
    for (const [source, color] of SOURCES) {
      // The five sources every limiter has are always listed; a lease only when there is one.
      if (!(source in rule.totals.sources)) continue;
      const n = rule.totals.sources[source] || 0;
      const share = total ? n / total : 0;
      if (share > 0) svg.append(svgEl("rect", { x: x * 600, width: share * 600, y: 0, height: 16, fill: color }));
      x += share;
      const item = el("span", { "data-source": source });
      const swatch = el("i");
      swatch.style.background = color;
      item.append(swatch, source + " " + (total ? Math.round(share * 1000) / 10 : 0) + "% (" + n + ")");
      legend.append(item);
    }
    if (total === 0) svg.append(svgEl("rect", { x: 0, width: 600, y: 0, height: 16, fill: "#eee" }));
    wrap.append(svg, legend);
    return wrap;
  }

  function card(rule) {
    const node = el("section", { class: "card", "data-rule": rule.rule });
    const title = el("h2", {}, rule.rule);
    if (rule.shadow) title.append(el("span", { class: "badge shadow" }, "shadow"));
    node.append(title);
    const totals = el("div", { class: "totals" });
    const stat = (cls, value, label) => {
      const box = el("div", { class: cls });
      box.append(el("b", {}, value), el("span", {}, label));
      totals.append(box);
    };
    stat("allowed", rule.totals.allowed, "allowed");
    stat("denied", rule.totals.denied, "denied");
    stat("cached", rule.totals.deniedFromCache, "denied from cache");
    stat("shadowed", rule.totals.shadowDenied, "shadow denials");
    if (rule.totals.units !== undefined) stat("units", rule.totals.units, "units charged");
    const key = el("div", { class: "legend" });
    for (const [label, color] of [["allowed", "#2e7d32"], [rule.shadow ? "shadow-denied" : "denied", rule.shadow ? "#6a1b9a" : "#c62828"]]) {
      const item = el("span");
      const swatch = el("i");
      swatch.style.background = color;
      item.append(swatch, label + " per minute");
      key.append(item);
    }
    node.append(totals, chart(rule), key);
    node.append(el("h3", {}, "How decisions were made"), sourcesBar(rule));
    // Regions (docs/regions.md): decisions of requests in each region, whoever decided them.
    const regions = Object.entries(rule.totals.regions || {}).sort((a, b) => b[1] - a[1]);
    if (regions.length > 0) {
      node.append(el("h3", {}, "By region"));
      const table = el("table", { class: "regions" });
      for (const [region, count] of regions) {
        const row = el("tr", { "data-region": region });
        row.append(el("td", { class: "key" }, region), el("td", { class: "count" }, count));
        table.append(row);
      }
      node.append(table);
    }
    node.append(el("h3", {}, "Top denied client keys"));
    if (rule.topDenied.length === 0) node.append(el("div", { class: "empty" }, "none"));
    else {
      const table = el("table", { class: "top-keys" });
      for (const { key, count, label } of rule.topDenied) {
        const row = el("tr", { "data-key": key });
        row.append(keyCell(key, label), el("td", { class: "count" }, count));
        table.append(row);
      }
      node.append(table);
    }
    if (rule.totals.units !== undefined) node.append(...usageSection(rule));
    return node;
  }

  // With analytics.keyLabels, a header rule's key (a SHA-256) comes with its raw value.
  function keyCell(key, label) {
    const cell = el("td", { class: "key" });
    if (label === undefined) cell.textContent = key;
    else cell.append(el("span", { class: "label" }, label), el("span", { class: "digest", title: key }, key.slice(0, 12) + "…"));
    return cell;
  }
${USAGE_SCRIPT}

  // Overrides and blocks set at run time (docs/plans.md): the first page of each, fetched beside
  // the stats (not after them), so the page is drawn whole: never rules with an empty Plans card.
  const PLAN_PARTS = [["overrides", "Overrides"], ["blocks", "Key blocks"], ["network", "Network blocks"]];
  function fetchPlans(base) {
    return Promise.all(PLAN_PARTS.map(async ([what]) => {
      const res = await fetch(base + "?count=100&what=" + what, { credentials: "same-origin", cache: "no-store" });
      if (!res.ok) throw new Error("GET /check/plans answered " + res.status);
      return res.json();
    }));
  }
  function plans(pages) {
    const section = document.getElementById("plans");
    const nodes = [el("h2", {}, "Plans")];
    for (const [i, [what, title]] of PLAN_PARTS.entries()) {
      const page = pages[i];
      nodes.push(el("h3", {}, title));
      if (page.entries.length === 0) {
        nodes.push(el("div", { class: "empty" }, "none"));
        continue;
      }
      const table = el("table", { class: "plans", "data-what": what });
      for (const entry of page.entries) {
        const row = el("tr", { "data-key": entry.value });
        const detail = entry.limit !== undefined ? "limit " + entry.limit
          : entry.until ? "until " + new Date(entry.until).toISOString().slice(0, 19) + " UTC" : "until removed";
        const who = el("td", { class: "key" }, entry.by + " " + (entry.label === undefined ? entry.value : entry.label));
        if (entry.label !== undefined) who.append(el("span", { class: "digest", title: entry.value }, entry.value.slice(0, 12) + "…"));
        row.append(el("td", {}, entry.policy || "every rule"), who, el("td", { class: "count" }, detail));
        table.append(row);
      }
      nodes.push(table);
      if (page.cursor !== "0") nodes.push(el("div", { class: "empty" }, "more: GET /check/plans?what=" + what + "&cursor=" + page.cursor));
    }
    section.replaceChildren(...nodes);
  }

  // Sharded deployments: each shard's breaker in this isolate and what it decided, by source.
  function shards(report) {
    const section = document.getElementById("shards");
    section.hidden = !report;
    if (!report) return;
    const table = el("table", { class: "plans" });
    for (const shard of report.shards) {
      const decided = Object.entries(shard.decided).map(([source, n]) => source + " " + n).join(", ");
      const role = shard.placed ? "placed" : "being removed";
      const row = el("tr", { "data-shard": shard.name });
      row.append(
        el("td", { class: "key" }, shard.name === "" ? "(unsuffixed)" : shard.name),
        el("td", {}, shard.breaker),
        el("td", {}, role),
        el("td", { class: "count" }, decided || "no decisions yet"),
      );
      table.append(row);
    }
    section.replaceChildren(el("h3", {}, "shards (this isolate) · placement " + report.placement.phase), table);
  }

  async function refresh() {
    const status = document.getElementById("status");
    try {
      // From the origin and path, never the page's own URL: one opened as
      // http://user:pass@host/… holds credentials, and fetch refuses such a URL ("Request cannot
      // be constructed from a URL that includes credentials"). The browser sends the Basic
      // credentials it logged in with all the same.
      const base = location.origin + location.pathname.replace(/[^/]*$/, "");
      const [stats, planPages] = await Promise.all([
        fetch(base + "stats?minutes=60", { credentials: "same-origin", cache: "no-store" }).then((res) => {
          if (!res.ok) throw new Error("GET /check/stats answered " + res.status);
          return res.json();
        }),
        fetchPlans(base + "plans"),
      ]);
      const main = document.getElementById("rules");
      main.replaceChildren();
      if (!stats.enabled) main.append(el("p", { class: "empty" }, stats.detail));
      // Concurrency rules: slots held now, over every key (a lower bound when the scan stopped).
      for (const slots of stats.inFlight || []) {
        main.append(el("p", { class: "in-flight", "data-rule": slots.policy },
          slots.policy + ": " + slots.inFlight + (slots.complete ? "" : "+") + " in flight over " + slots.keys + " key" + (slots.keys === 1 ? "" : "s")));
      }
      for (const rule of stats.rules) main.append(card(rule));
      shards(stats.shards);
      const breaker = stats.isolate ? stats.isolate.breaker.state : "unknown";
      const badge = document.getElementById("breaker");
      badge.textContent = breaker;
      badge.className = "badge " + breaker;
      status.className = "";
      status.textContent = "updated " + new Date(stats.generatedAt || Date.now()).toISOString().slice(11, 19) + " UTC";
      plans(planPages);
      await highlight();
      document.body.dataset.loaded = String(Number(document.body.dataset.loaded || 0) + 1);
    } catch (error) {
      status.className = "error";
      status.textContent = String(error.message || error);
    }
  }
  // Header rules count a client under the SHA-256 of its header value (the proxy hashes it), so
  // their top keys are digests: an operator types the raw value (an API key) and the page
  // hashes it, locally, and marks the rows it names. Raw keys ("ip" rules, a middleware's own
  // keys) match as typed.
  const hex = (buf) => Array.from(new Uint8Array(buf), (b) => b.toString(16).padStart(2, "0")).join("");
  async function highlight() {
    const typed = document.getElementById("find").value.trim();
    const wanted = new Set(typed ? [typed] : []);
    if (typed && crypto.subtle) {
      wanted.add(hex(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(typed))));
    }
    let n = 0;
    for (const row of document.querySelectorAll("tr[data-key]")) {
      const hit = wanted.has(row.dataset.key);
      row.classList.toggle("found", hit);
      if (hit) n++;
    }
    document.getElementById("found").textContent = typed ? n + " row" + (n === 1 ? "" : "s") : "";
  }
  document.getElementById("find").addEventListener("input", () => { highlight(); });
  refresh();
  setInterval(refresh, 10000);
})();
</script>
</body>
</html>
`;
