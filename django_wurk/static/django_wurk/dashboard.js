/* django-wurk dashboard: plain JavaScript, no build step, no dependencies.
 *
 * - buttons with data-confirm ask before submitting;
 * - a checkbox with data-wurk-select-all ticks every row of its form;
 * - on the dashboard, the numbers and the live throughput graph follow the JSON stats.
 *
 * Everything from the server is written with textContent / setAttribute, never innerHTML.
 */
"use strict";
(function () {
    const SVG = "http://www.w3.org/2000/svg";

    document.addEventListener("click", function (event) {
        const button = event.target.closest("[data-confirm]");
        if (button && !window.confirm(button.getAttribute("data-confirm"))) {
            event.preventDefault();
        }
    });

    document.addEventListener("change", function (event) {
        const all = event.target.closest("[data-wurk-select-all]");
        if (!all) {
            return;
        }
        const form = all.closest("form");
        if (form) {
            form.querySelectorAll('input[type=checkbox][name="key"]').forEach(function (box) {
                box.checked = all.checked;
            });
        }
    });

    function el(name, attrs, text) {
        const node = document.createElementNS(SVG, name);
        Object.keys(attrs).forEach(function (key) {
            node.setAttribute(key, String(attrs[key]));
        });
        if (text !== undefined) {
            node.textContent = text;
        }
        return node;
    }

    function compact(value) {
        const units = [[1e9, "G"], [1e6, "M"], [1e3, "k"]];
        for (const [limit, suffix] of units) {
            if (Math.abs(value) >= limit) {
                return String(Number((value / limit).toPrecision(3))) + suffix;
            }
        }
        return String(Math.round(value * 100) / 100);
    }

    /* The top of an axis with four even ticks (the same rule as charts.py's nice_ceiling). */
    function niceCeiling(value) {
        if (value <= 4) {
            return 4;
        }
        const quarter = value / 4;
        const exp = Math.pow(10, Math.floor(Math.log10(quarter)));
        for (const step of [1, 2, 2.5, 3, 4, 5, 6, 8, 10]) {
            if (step * exp >= quarter) {
                return 4 * step * exp;
            }
        }
        return 40 * exp;
    }

    /* The live graph: the same geometry and CSS classes as the server-rendered charts. */
    function drawLive(svg, points) {
        const width = 960, height = 220, left = 56, right = 14, top = 12, bottom = 28;
        const plotW = width - left - right, plotH = height - top - bottom;
        while (svg.firstChild) {
            svg.removeChild(svg.firstChild);
        }
        let peak = 0;
        points.forEach(function (p) {
            peak = Math.max(peak, p.processed, p.failed);
        });
        peak = niceCeiling(peak);
        const n = points.length;
        const x = function (i) {
            return left + (n <= 1 ? plotW / 2 : (plotW * i) / (n - 1));
        };
        const y = function (v) {
            return top + plotH - plotH * (v / peak);
        };
        for (let k = 0; k <= 4; k++) {
            const v = (peak * k) / 4;
            svg.appendChild(el("line", {class: "wurk-grid", x1: left, x2: width - right, y1: y(v), y2: y(v)}));
            svg.appendChild(el("text", {class: "wurk-axis", x: left - 6, y: y(v) + 4, "text-anchor": "end"}, compact(v)));
        }
        if (n === 0) {
            svg.appendChild(el("text", {class: "wurk-axis", x: left + plotW / 2, y: top + plotH / 2, "text-anchor": "middle"},
                "Waiting for the first poll…"));
            return;
        }
        const step = Math.max(1, Math.ceil(n / 6));
        points.forEach(function (p, i) {
            if (i % step === 0 || i === n - 1) {
                const anchor = n > 1 && i === 0 ? "start" : n > 1 && i === n - 1 ? "end" : "middle";
                svg.appendChild(el("text", {class: "wurk-axis", x: x(i), y: height - 8, "text-anchor": anchor}, p.label));
            }
        });
        ["processed", "failed"].forEach(function (name) {
            const coords = points.map(function (p, i) {
                return x(i).toFixed(1) + "," + y(p[name]).toFixed(1);
            });
            if (n === 1) {
                svg.appendChild(el("circle", {class: "wurk-dot wurk-" + name, cx: x(0), cy: y(points[0][name]), r: 3}));
                return;
            }
            const base = y(0).toFixed(1);
            svg.appendChild(el("polygon", {
                class: "wurk-area wurk-" + name,
                points: x(0).toFixed(1) + "," + base + " " + coords.join(" ") + " " + x(n - 1).toFixed(1) + "," + base,
            }));
            svg.appendChild(el("polyline", {class: "wurk-line wurk-" + name, points: coords.join(" ")}));
        });
        const column = plotW / Math.max(n - 1, 1);
        points.forEach(function (p, i) {
            const hit = el("rect", {class: "wurk-hit", x: Math.max(x(i) - column / 2, left), y: top, width: column, height: plotH});
            hit.appendChild(el("title", {}, p.label + "\nProcessed: " + p.processed + "\nFailed: " + p.failed));
            svg.appendChild(hit);
        });
    }

    function startLive(config) {
        const svg = document.getElementById("wurk-live-chart");
        const select = document.getElementById("wurk-poll-interval");
        const toggle = document.getElementById("wurk-poll-toggle");
        const status = document.getElementById("wurk-poll-status");
        const alertBox = document.getElementById("wurk-live-alert");
        const maxPoints = 60;
        const points = [];
        let last = config.initial;
        let timer = null;
        let paused = false;
        let interval = config.interval;
        const fromUrl = new URLSearchParams(window.location.search).get("interval");
        const saved = window.localStorage ? window.localStorage.getItem("wurk.pollInterval") : null;
        if (!fromUrl && saved && select.querySelector('option[value="' + Number(saved) + '"]')) {
            interval = Number(saved);
        }
        select.value = String(interval);

        function showAlert(text) {
            alertBox.textContent = text;
            alertBox.hidden = false;
        }

        function update(stats) {
            document.querySelectorAll("[data-stat]").forEach(function (node) {
                const value = stats[node.getAttribute("data-stat")];
                if (typeof value !== "number") {
                    return;
                }
                const text = value.toLocaleString("en-US");
                if (node.textContent !== text) {
                    node.textContent = text;
                    node.classList.remove("wurk-changed");
                    void node.offsetWidth; // restart the animation
                    node.classList.add("wurk-changed");
                }
            });
        }

        async function poll() {
            timer = null;
            try {
                const response = await fetch(config.statsUrl, {
                    credentials: "same-origin",
                    cache: "no-store",
                    headers: {Accept: "application/json"},
                });
                const type = response.headers.get("Content-Type") || "";
                if (!type.includes("application/json")) {
                    showAlert("Your session has ended or the stats cannot be read (HTTP " + response.status + "). Reload the page.");
                } else {
                    const data = await response.json();
                    if (response.status === 503) {
                        showAlert("Redis is unavailable: " + (data.message || data.error) + ". Retrying…");
                    } else if (!response.ok) {
                        showAlert("The stats request failed (HTTP " + response.status + ").");
                    } else {
                        alertBox.hidden = true;
                        const s = data.sidekiq;
                        update(s);
                        points.push({
                            label: data.server_utc_time.replace(" UTC", ""),
                            processed: Math.max(s.processed - last.processed, 0),
                            failed: Math.max(s.failed - last.failed, 0),
                        });
                        if (points.length > maxPoints) {
                            points.shift();
                        }
                        last = s;
                        drawLive(svg, points);
                        document.getElementById("wurk-server-time").textContent = data.server_utc_time;
                        status.dataset.polls = String(Number(status.dataset.polls || 0) + 1);
                    }
                }
            } catch (error) {
                showAlert("Cannot reach the server: " + error.message + ". Retrying…");
            }
            schedule();
        }

        function schedule() {
            if (!paused && timer === null) {
                timer = window.setTimeout(poll, interval * 1000);
            }
        }

        select.addEventListener("change", function () {
            interval = Number(select.value);
            if (window.localStorage) {
                window.localStorage.setItem("wurk.pollInterval", String(interval));
            }
            if (timer !== null) {
                window.clearTimeout(timer);
                timer = null;
            }
            schedule();
        });
        toggle.addEventListener("click", function () {
            paused = !paused;
            toggle.textContent = paused ? "Resume" : "Pause";
            if (paused && timer !== null) {
                window.clearTimeout(timer);
                timer = null;
            }
            schedule();
        });
        drawLive(svg, points);
        schedule();
    }

    document.addEventListener("DOMContentLoaded", function () {
        const node = document.getElementById("wurk-live-config");
        if (node) {
            startLive(JSON.parse(node.textContent));
        }
    });
})();
