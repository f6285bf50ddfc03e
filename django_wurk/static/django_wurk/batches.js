/* django-wurk dashboard: a batch's page follows its status JSON until the batch succeeds.
 *
 * Plain JavaScript; everything from the server is written with textContent, style.width
 * (a number we format) or setAttribute, never innerHTML.
 */
"use strict";
(function () {
    const INTERVAL_MS = 1000;

    function start() {
        const root = document.getElementById("wurk-batch");
        if (!root) {
            return;
        }
        const url = root.getAttribute("data-status-url");
        const bar = root.querySelector(".wurk-progress");
        const number = new Intl.NumberFormat("en-US");

        function setText(selector, value) {
            root.querySelectorAll(selector).forEach(function (node) {
                node.textContent = value;
            });
        }

        /* As the server writes a time (the stamp and utc filters): "just now" with the exact
         * UTC time as a tooltip, then the exact time, muted. It happened while we watched. */
        function moment(seconds) {
            const when = new Date(seconds * 1000);
            const exact = when.toISOString().slice(0, 19).replace("T", " ") + " UTC";
            const time = document.createElement("time");
            time.setAttribute("datetime", when.toISOString().slice(0, 19) + "Z");
            time.setAttribute("title", exact);
            time.textContent = "just now";
            const muted = document.createElement("span");
            muted.className = "wurk-muted";
            muted.textContent = exact;
            return [time, " ", muted];
        }

        function badge(text, extra) {
            const span = document.createElement("span");
            span.className = "wurk-badge" + (extra ? " " + extra : "");
            span.textContent = text;
            return span;
        }

        function render(data) {
            const p = data.progress;
            const parts = {
                "wurk-bar-succeeded": p.succeeded,
                "wurk-bar-failing": p.failing,
                "wurk-bar-dead": p.dead,
                "wurk-bar-waiting": p.waiting,
            };
            const total = p.succeeded + p.failing + p.dead + p.waiting;
            Object.keys(parts).forEach(function (part) {
                const width = total ? (100 * parts[part]) / total : 0;
                const segment = bar.querySelector('[data-part="' + part + '"]');
                if (segment) {
                    segment.style.width = width.toFixed(2) + "%";
                }
                setText('[data-count="' + part + '"]', number.format(parts[part]));
            });
            bar.setAttribute("aria-valuenow", String(p.done_percent));
            setText('[data-count="done_percent"]', String(Math.round(Number(p.done_percent))));
            ["total", "pending", "failures", "dead", "child_count"].forEach(function (key) {
                setText('[data-stat="' + key + '"]', number.format(data[key]));
            });
            setText('[data-stat="unfinished"]', number.format(p.unfinished));
            ["complete_at", "success_at"].forEach(function (key) {
                const cell = root.querySelector('[data-time="' + key + '"]');
                if (data[key] && cell && !cell.querySelector("time")) {
                    cell.replaceChildren(...moment(data[key]));
                }
            });
            const state = root.querySelector("[data-state]");
            if (state) {
                state.replaceChildren();
                if (data.succeeded) {
                    state.append(badge("succeeded", "wurk-badge-ok"));
                } else if (data.complete) {
                    state.append(badge("complete", "wurk-badge-info"));
                } else {
                    state.append(badge("pending"));
                }
                if (data.died) {
                    state.append(" ", badge("death", "wurk-badge-dead"));
                }
                if (data.invalidated) {
                    state.append(" ", badge("cancelled", "wurk-badge-warn"));
                }
            }
            return data.succeeded;
        }

        async function poll() {
            let finished = false;
            try {
                const response = await fetch(url, {
                    headers: { Accept: "application/json" },
                    credentials: "same-origin",
                    cache: "no-store",
                });
                if (response.status === 404) {
                    return; // expired: nothing more to follow
                }
                if (response.ok) {
                    finished = render(await response.json());
                }
            } catch (error) {
                // A network blip: try again at the next tick.
            }
            if (!finished) {
                window.setTimeout(poll, INTERVAL_MS);
            }
        }

        window.setTimeout(poll, INTERVAL_MS);
    }

    if (document.readyState === "loading") {
        document.addEventListener("DOMContentLoaded", start);
    } else {
        start();
    }
})();
