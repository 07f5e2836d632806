/**
 * The dashboard page's style sheet (dashboard-page.ts inlines it: the page loads nothing from
 * elsewhere).
 */
export const DASHBOARD_CSS = `  :root { --ok: #2e7d32; --deny: #c62828; --cache: #ef6c00; --shadow: #6a1b9a; --muted: #666; --units: #1565c0; }
  body { font: 14px/1.4 system-ui, sans-serif; margin: 0; background: #f5f6f8; color: #1b1f24; }
  header { background: #1b1f24; color: #fff; padding: 12px 20px; display: flex; gap: 16px; align-items: baseline; flex-wrap: wrap; }
  header h1 { font-size: 18px; margin: 0; }
  header .meta { color: #bbb; font-size: 12px; }
  main { padding: 16px 20px; display: grid; gap: 16px; grid-template-columns: repeat(auto-fill, minmax(460px, 1fr)); }
  .card { background: #fff; border-radius: 8px; padding: 14px 16px; box-shadow: 0 1px 2px rgba(0,0,0,.08); }
  .card h2 { font-size: 16px; margin: 0 0 8px; display: flex; gap: 8px; align-items: center; }
  .badge { font-size: 11px; padding: 1px 7px; border-radius: 10px; background: #eee; color: #333; font-weight: 600; }
  .badge.shadow { background: #f3e5f5; color: var(--shadow); }
  .badge.closed { background: #e8f5e9; color: var(--ok); }
  .badge.open { background: #ffebee; color: var(--deny); }
  .badge.half-open { background: #fff3e0; color: var(--cache); }
  .totals { display: flex; gap: 14px; flex-wrap: wrap; margin-bottom: 8px; }
  .totals div { min-width: 70px; }
  .totals b { display: block; font-size: 20px; }
  .totals span { color: var(--muted); font-size: 12px; }
  .allowed b { color: var(--ok); } .denied b { color: var(--deny); }
  .cached b { color: var(--cache); } .shadowed b { color: var(--shadow); }
  .units b { color: var(--units); }
  svg { display: block; width: 100%; height: auto; }
  h3 { font-size: 12px; text-transform: uppercase; letter-spacing: .04em; color: var(--muted); margin: 12px 0 4px; }
  table { border-collapse: collapse; width: 100%; font-size: 13px; }
  td { padding: 2px 4px; border-bottom: 1px solid #eee; }
  td.key { font-family: ui-monospace, monospace; word-break: break-all; }
  td.key .digest { color: #888; font-size: 11px; margin-left: 6px; }
  td.count { text-align: right; width: 60px; }
  table.top-spenders td.count { width: 90px; }
  .legend { display: flex; gap: 10px; flex-wrap: wrap; font-size: 12px; color: var(--muted); }
  .legend i { display: inline-block; width: 10px; height: 10px; margin-right: 4px; vertical-align: -1px; }
  #status.error { color: #ff8a80; }
  .empty { color: var(--muted); }
  tr.found td { background: #fff59d; }
  #find { font: inherit; padding: 2px 6px; border-radius: 4px; border: 0; width: 220px; }
  #plans, #shards { margin: 0 20px 16px; }
  table.plans td.count { width: auto; white-space: nowrap; }
`;
