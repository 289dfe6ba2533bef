"""How the timeline's pages look (private): the stylesheet, and the SVG patterns and mark
shapes every chart and the legend use (once per page). Changes when the look does, and
with it nothing the page says."""

from __future__ import annotations

__all__ = ["CSS", "DEFS"]

CSS = """
:root{--ok:#1b7f4b;--inc:#d98c00;--fail:#c7361a;--lost:#8e3fa8;--aband:#6b6b6b;
--rel:#1f5fa8;--run:#2b8fd6;--exp:#a8742c;--ink:#1d2329;--muted:#5d6873;--line:#d5dbe1;--bg:#fff;
--panel:#f5f7f9}
*{box-sizing:border-box}
body{margin:0;font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",
sans-serif;color:var(--ink);background:var(--bg)}
main{max-width:1260px;margin:0 auto;padding:18px 22px 40px;overflow-wrap:anywhere}
h1{font-size:21px;margin:0 0 2px}h2{font-size:17px;margin:26px 0 6px}
h3{font-size:15px;margin:18px 0 4px}
.sub{color:var(--muted);margin:0 0 12px}
.zoom{margin:4px 0;color:var(--muted)}details.whole{margin:4px 0 10px}
code,.mono{font-family:"DejaVu Sans Mono",Menlo,Consolas,monospace;font-size:12.5px}
.legend{display:flex;flex-wrap:wrap;gap:6px 18px;margin:8px 0 12px;padding:8px 12px;
background:var(--panel);border-radius:6px;font-size:13px}
.legend span{display:inline-flex;align-items:center;gap:6px}
.legend svg{flex:none}
.legend b{font-weight:600;margin-right:2px}
figure,div.chart{margin:0;border:1px solid var(--line);border-radius:6px;padding:4px 0;
overflow-x:auto}
figure svg,div.chart svg{display:block;width:100%;min-width:900px;height:auto}
.summary{margin:4px 0}
.note{color:#8a4b00}
.tw{overflow-x:auto}
table{border-collapse:collapse;width:100%;font-size:12.5px;margin:6px 0;
overflow-wrap:normal}
th,td{text-align:left;padding:3px 8px;border-bottom:1px solid var(--line);
vertical-align:top}
th{background:var(--panel);font-weight:600;position:sticky;top:0;white-space:nowrap}
td.num{text-align:right;font-variant-numeric:tabular-nums}
td{white-space:nowrap}td:last-child{white-space:normal;min-width:14em}
table.events td.at{white-space:normal;min-width:8.6em}
table.events td.id{white-space:normal;overflow-wrap:anywhere;min-width:10em}
table.events td.wrap{white-space:normal;min-width:6em}table.events td.items{min-width:10.5em}
table.events td.said{white-space:normal;overflow-wrap:anywhere;min-width:12em}
details.more{margin:0}details.more summary{color:inherit}
details.more[open] summary{color:var(--muted)}
tr:target{background:#fff3c4}
.tag{display:inline-block;padding:0 7px;border-radius:9px;font-size:12px;color:#fff;
font-weight:600;white-space:nowrap}
.t-succeeded,.t-held{background:var(--ok)}.t-incomplete{background:var(--inc)}
.t-failed,.t-FAILED{background:var(--fail)}.t-lease_lost{background:var(--lost)}
.t-abandoned{background:var(--aband)}.t-expired{background:var(--exp)}
.t-released_by_operator{background:var(--rel)}
.t-running{background:var(--run)}.t-decision{background:#e4e8ec;color:var(--ink)}
.t-marker{background:#333}
details{margin:4px 0}summary{cursor:pointer;color:var(--muted)}
ul.checks{list-style:none;padding:0;margin:4px 0}
.two{display:grid;grid-template-columns:minmax(0,2fr) minmax(0,3fr);gap:0 28px}
.two ul{margin:4px 0;padding-left:18px}.two ul.checks{padding-left:0}
section{margin-top:10px}
ul.checks li{margin:2px 0}
.ok{color:var(--ok);font-weight:700}.bad{color:var(--fail);font-weight:700}
.side{display:inline-block;min-width:88px;color:var(--muted)}
.drills td,.drills th{text-align:right}.drills td:first-child,.drills th:first-child{
text-align:left}
svg text{font-family:system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif}
svg .ax{font-size:11.5px;fill:var(--muted)}
svg .day{font-size:11.5px;fill:var(--ink);font-weight:600}
svg .grid{stroke:var(--line);stroke-width:1}
svg .job{font-size:14px;font-weight:700;fill:var(--ink)}
svg .sum{font-size:12px;fill:var(--muted)}
svg .lbl{font-size:11px;fill:#fff;pointer-events:none;font-weight:600}
svg .lbl.dark{fill:var(--ink)}
svg .b{stroke:#fff;stroke-width:.75}svg .dense .b{stroke:none;shape-rendering:crispEdges}
svg a:hover .b,svg .b:target{stroke:#111}
svg .s-succeeded{fill:var(--ok)}svg .s-incomplete{fill:var(--inc)}
svg .s-failed{fill:var(--fail)}svg .s-lease_lost{fill:url(#p-lost)}
svg .s-abandoned{fill:url(#p-aband)}svg .s-expired{fill:url(#p-exp)}
svg .s-released_by_operator{fill:var(--rel)}
svg .s-running{fill:url(#p-run)}svg .s-other{fill:#999}
svg .lane{fill:#fafbfc}
svg .link{stroke:#9aa5b1;stroke-width:1;stroke-dasharray:2 2}
svg .mk{stroke:#222;stroke-width:1.4;stroke-dasharray:4 3}
svg .became{fill:none;stroke:#5b8fc7;stroke-width:1;stroke-dasharray:3 2}
svg .chain{fill:none;stroke:#2f6f3e;stroke-width:2}
svg .ghost{stroke:#8d8d8d;stroke-width:3;stroke-dasharray:1 4;stroke-linecap:round}
svg .mkt{font-size:10.5px;font-weight:700}
svg .rowlbl{font-size:10.5px;fill:var(--muted)}
svg a:hover use{opacity:.7}
"""

DEFS = """<defs>
<pattern id="p-aband" width="7" height="7" patternUnits="userSpaceOnUse" \
patternTransform="rotate(45)"><rect width="7" height="7" fill="#8d8d8d"/>\
<rect width="3" height="7" fill="#5e5e5e"/></pattern>
<pattern id="p-lost" width="8" height="8" patternUnits="userSpaceOnUse" \
patternTransform="rotate(-45)"><rect width="8" height="8" fill="#8e3fa8"/>\
<rect width="2" height="8" fill="#b57ccb"/></pattern>
<pattern id="p-exp" width="6" height="6" patternUnits="userSpaceOnUse">\
<rect width="6" height="6" fill="#a8742c"/>\
<rect width="2" height="6" fill="#d9b07a"/></pattern>
<pattern id="p-run" width="10" height="10" patternUnits="userSpaceOnUse" \
patternTransform="rotate(45)"><rect width="10" height="10" fill="#2b8fd6"/>\
<rect width="4" height="10" fill="#5fb0ea"/></pattern>
<symbol id="m-skipped" viewBox="-6 -6 12 12" width="12" height="12" overflow="visible">\
<circle r="5" fill="#fff" stroke="#444" stroke-width="1.6"/>\
<path d="M-3.3 3.3 3.3-3.3" stroke="#444" stroke-width="1.6"/></symbol>
<symbol id="m-queued" viewBox="-6 -6 12 12" width="12" height="12" overflow="visible">\
<path d="M-4-5 5 0-4 5z" fill="#1f5fa8"/></symbol>
<symbol id="m-coalesced" viewBox="-6 -6 12 12" width="12" height="12" overflow="visible">\
<path d="M0-5.5 5.5 0 0 5.5-5.5 0z" fill="#0f8a8a"/></symbol>
<symbol id="m-duplicate" viewBox="-6 -6 12 12" width="12" height="12" overflow="visible">\
<circle r="4.5" fill="#7a8691"/><circle r="1.6" fill="#fff"/></symbol>
<symbol id="m-stale" viewBox="-6 -6 12 12" width="12" height="12" overflow="visible">\
<rect x="-4.5" y="-4.5" width="9" height="9" fill="#9a6a2f"/></symbol>
<symbol id="m-paused" viewBox="-6 -6 12 12" width="12" height="12" overflow="visible">\
<rect x="-4.5" y="-5" width="3.2" height="10" fill="#222"/>\
<rect x="1.3" y="-5" width="3.2" height="10" fill="#222"/></symbol>
<symbol id="m-dropped" viewBox="-6 -6 12 12" width="12" height="12" overflow="visible">\
<path d="M-4.5-4.5 4.5 4.5M4.5-4.5-4.5 4.5" stroke="#c7361a" stroke-width="2.4"/></symbol>
<symbol id="m-rejected" viewBox="-6 -6 12 12" width="12" height="12" overflow="visible">\
<path d="M0-5.5 5.5 4.5-5.5 4.5z" fill="#fff" stroke="#c7361a" stroke-width="1.6"/>\
<path d="M0-1.5V1.8" stroke="#c7361a" stroke-width="1.6"/></symbol>
<symbol id="m-superseded" viewBox="-6 -6 12 12" width="12" height="12" overflow="visible">\
<circle r="4.5" fill="#fff" stroke="#2f6f3e" stroke-width="1.6"/>\
<path d="M-3 0H3" stroke="#2f6f3e" stroke-width="1.6"/></symbol>
<symbol id="m-other" viewBox="-6 -6 12 12" width="12" height="12" overflow="visible">\
<circle r="4" fill="#bbb"/></symbol>
</defs>"""
