// modulo view: the trace viewer. Vanilla JS, no build step, no external asset.
// Every text that comes from a run (model replies, plans, feedback, ids) reaches the page as a text
// node or an attribute value set through the DOM: nothing is ever parsed as HTML.
"use strict";
(function () {
  const META = JSON.parse(document.getElementById("modulo-meta").textContent);
  const PAGE_SIZE = 100;
  const FOLD = 4000;
  const app = document.getElementById("app");
  const chunks = new Map();
  const waiting = new Map();

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === "class") node.className = v;
      else if (k === "onclick") node.addEventListener("click", v);
      else if (k === "oninput") node.addEventListener("input", v);
      else if (k === "onchange") node.addEventListener("change", v);
      else node.setAttribute(k, String(v));
    }
    for (const c of children.flat()) {
      if (c === null || c === undefined || c === false) continue;
      node.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return node;
  }
  const fmtInt = (n) => (n === null || n === undefined ? "-" : Number(n).toLocaleString("en-US"));
  const fmtUsd = (x) => "$" + Number(x || 0).toFixed(4);
  const pct = (x) => (x === null || x === undefined ? "n/a" : (100 * x).toFixed(1));
  // the counts behind a rate, " (k/n)" ("" when unknown or not whole numbers)
  const counts = (kn) => (kn && Number.isInteger(kn[0]) && Number.isInteger(kn[1]) ? ` (${kn[0]}/${kn[1]})` : "");
  function interval(iv) {
    if (!iv || iv[0] === null) return "n/a";
    if (iv[1] === null) return pct(iv[0]);
    return pct(iv[0]) + " [" + pct(iv[1]) + ", " + pct(iv[2]) + "]";
  }
  // a metric's value: a rate in % with its interval and k/n, a count or a value as it is
  const metricText = (kind, iv, kn) => (kind === "rate" ? interval(iv) + counts(kn) : iv[0] === null ? "n/a" : String(iv[0]));
  // a run's dollars: a lower bound when some model had no price (its calls counted $0)
  const costText = (u) => (u.unpriced && u.unpriced.length
    ? `at least ${fmtUsd(u.cost)} (no price known for ${u.unpriced.join(", ")})` : fmtUsd(u.cost));
  function usageText(u) {
    let t = `${u.calls} call(s) (${u.cached} cache hit(s), ${u.failed} failed), ${fmtInt(u.tokens_in)} tokens in, ` +
      `${fmtInt(u.tokens_out)} out, ${costText(u)}`;
    if (u.cached) t += ` (cache hits would have cost ${fmtUsd(u.cached_cost)})`;
    return t;
  }
  function outcomeChip(o) { return el("span", { class: "outcome o-" + o }, o); }
  // a safe href: only the page's own routes and relative file paths prepared by modulo
  function link(href, text) {
    const safe = /^(#|\.\/)/.test(href) ? href : "#";
    return el("a", { href: safe }, text);
  }

  // -- data: problems are loaded on demand (embedded JSON blocks, or chunk files next to the page) --------
  window.moduloChunk = function (k, data) {
    chunks.set(k, data);
    const w = waiting.get(k);
    if (w) { waiting.delete(k); w.forEach((f) => f(data)); }
  };
  function loadChunk(k) {
    if (chunks.has(k)) return Promise.resolve(chunks.get(k));
    if (META.mode === "embedded") {
      const node = document.getElementById("modulo-p-" + k);
      const data = [JSON.parse(node.textContent)];
      chunks.set(k, data);
      return Promise.resolve(data);
    }
    return new Promise((resolve, reject) => {
      if (waiting.has(k)) { waiting.get(k).push(resolve); return; }
      waiting.set(k, [resolve]);
      const s = document.createElement("script");
      s.src = META.data_dir + "/chunk-" + String(k).padStart(5, "0") + ".js" + (META.live ? "?v=" + META.version : "");
      s.onerror = () => { waiting.delete(k); reject(new Error("could not load " + s.src)); };
      document.head.append(s);
    });
  }
  function loadProblem(i) {
    const [k, offset] = META.index.rows[i].slice(7, 9);
    return loadChunk(k).then((data) => data[offset]);
  }

  // -- texts: a problem's strings are interned (see modulo/view/data.py) --------------------------------
  function textResolver(entries) {
    const memo = new Map();
    return function get(i) {
      if (i === null || i === undefined) return null;
      if (memo.has(i)) return memo.get(i);
      const e = entries[i];
      const s = typeof e === "string" ? e : get(e[0]).slice(0, e[1]) + e[2];
      memo.set(i, s);
      return s;
    };
  }
  function folded(text, cls) {
    const pre = el("pre", { class: cls || null });
    if (text.length <= FOLD) { pre.textContent = text; return pre; }
    pre.textContent = text.slice(0, FOLD);
    const more = el("button", { class: "fold", type: "button" }, `show all ${fmtInt(text.length)} characters`);
    more.addEventListener("click", () => { pre.textContent = text; more.remove(); });
    return el("div", {}, pre, more);
  }
  function diffBlock(text) {
    const pre = el("pre", { class: "diff" });
    const lines = text.split("\n");
    const shown = lines.length > 400 ? lines.slice(0, 400) : lines;
    for (const line of shown) {
      const cls = line.startsWith("+++") || line.startsWith("---") ? "hunk" : line.startsWith("@@") ? "hunk"
        : line.startsWith("+") ? "add" : line.startsWith("-") ? "del" : null;
      pre.append(cls ? el("span", { class: cls }, line) : document.createTextNode(line + "\n"));
    }
    if (shown.length < lines.length) pre.append(document.createTextNode(`… ${lines.length - shown.length} more lines`));
    return pre;
  }
  function genericValue(value) {
    // fields this viewer does not know by name (tool calls, user turns, ...): a table for a list of
    // objects, JSON text otherwise
    if (Array.isArray(value) && value.length && value.every((v) => v && typeof v === "object" && !Array.isArray(v))) {
      const keys = [...new Set(value.flatMap((v) => Object.keys(v)))];
      return el("table", {},
        el("tr", {}, keys.map((k) => el("th", {}, k))),
        value.map((v) => el("tr", {}, keys.map((k) => {
          const x = v[k];
          const s = x === undefined ? "" : typeof x === "string" ? x : JSON.stringify(x, null, 1);
          return el("td", {}, s.length > 600 ? folded(s) : s);
        }))));
    }
    return folded(typeof value === "string" ? value : JSON.stringify(value, null, 2));
  }

  // -- routing -------------------------------------------------------------------------------------
  function parseHash() {
    const h = location.hash.replace(/^#\/?/, "");
    const [path, query] = h.split("?");
    const params = new URLSearchParams(query || "");
    const decode = (x) => { try { return decodeURIComponent(x); } catch (e) { return x; } };
    return { parts: path.split("/").filter(Boolean).map(decode), params };
  }
  function go(parts, params) {
    const q = params && params.toString();
    const target = "#/" + parts.map(encodeURIComponent).join("/") + (q ? "?" + q : "");
    if (location.hash !== target) location.hash = target; else render();
  }
  window.addEventListener("hashchange", render);

  function header() {
    const nav = el("nav", { class: "tabs" });
    if (META.parent) nav.append(link(META.parent, "↑ sweep"));
    if (META.overview.kind === "run") {
      nav.append(link("#/overview", "Overview"), link("#/problems", "Problems"));
    }
    return el("header", {}, el("h1", {}, META.overview.title), nav,
      META.live ? el("span", { class: "live", id: "live" }, "live: refreshes while the run writes") : null);
  }

  function render() {
    const { parts, params } = parseHash();
    app.replaceChildren(header());
    window.scrollTo(0, 0);
    const main = el("main", {});
    app.append(main);
    if (META.overview.kind === "sweep") { renderSweep(main); return; }
    if (parts[0] === "p" && parts.length > 1) { renderProblem(main, parts[1]); return; }
    if (parts[0] === "problems") { renderList(main, params); return; }
    renderOverview(main);
    renderList(main, params, true);
  }

  // -- run overview ----------------------------------------------------------------------------------
  function labelsTable(labels) {
    return el("table", { class: "labels" }, Object.entries(labels).map(([k, v]) => el("tr", {}, el("th", {}, k), el("td", {}, v))));
  }
  function renderOverview(main) {
    const o = META.overview;
    main.append(el("h2", {}, "Run"), labelsTable(o.labels));
    if (o.status !== "complete") {
      main.append(el("div", { class: "note", id: "status" }, `Status: ${o.status}. The metrics cover only the ` +
        "problems scored: problems that ended in error or never started are left out of every metric."));
    }
    for (const n of o.notes) main.append(el("div", { class: "note" }, n));
    main.append(el("h2", {}, "Outcomes"),
      el("p", {}, `${fmtInt(o.n_finished)} of ${fmtInt(o.n_problems)} problems finished` + (o.complete ? "" : " (the run is incomplete)")),
      el("table", { id: "outcomes" }, el("tr", {}, Object.keys(o.outcomes).map((k) => el("th", {}, k))),
        el("tr", {}, Object.values(o.outcomes).map((v) => el("td", { class: "num" }, fmtInt(v))))));
    main.append(el("h2", {}, "Metrics (%, 95% bootstrap interval over problems)"));
    if (!o.metrics.rows.length) main.append(el("p", { class: "muted" }, `no metrics: evaluation ${o.metrics.status}`));
    else {
      main.append(el("p", { class: "muted" }, `evaluation: ${o.metrics.status}`),
        el("table", { id: "metrics" }, el("tr", {}, el("th", {}, "metric"), el("th", {}, "value"), el("th", {}, "how")),
          o.metrics.rows.map(([label, kind, iv, rule, kn]) => el("tr", {}, el("td", {}, label),
            el("td", { class: "num" }, metricText(kind, iv, kn)),
            el("td", { class: "muted" }, rule)))));
    }
    main.append(el("h2", {}, "Usage and cost"), el("p", {}, usageText(o.usage) +
      (o.certified ? `; ${o.usage.unpriced && o.usage.unpriced.length ? "at least " : ""}${fmtUsd(o.usage.cost / o.certified)} per certified plan` : "")));
    if (o.figures.length) {
      main.append(el("h2", {}, "Figures"));
      for (const [name, uri, caption] of o.figures) {
        if (uri.startsWith("data:image/png;base64,")) main.append(el("figure", {}, el("img", { src: uri, alt: name, width: 720 }), el("figcaption", { class: "muted" }, caption)));
      }
    }
  }

  // -- problem list ------------------------------------------------------------------------------------
  const IDX = META.index;
  function renderList(main, params, embedded) {
    const q = (params.get("q") || "").toLowerCase();
    const outcome = params.get("outcome") || "";
    const critic = params.get("critic") || "";
    const ci = critic ? IDX.critics.indexOf(critic) : -1;
    const rows = [];
    IDX.rows.forEach((r, i) => {
      if (outcome && r[1] !== outcome) return;
      if (critic && !r[3].includes(ci)) return;
      if (q && !(r[0].toLowerCase().includes(q) || r[3].some((c) => IDX.critics[c].toLowerCase().includes(q)) || r[6].toLowerCase().includes(q))) return;
      rows.push(i);
    });
    const pages = Math.max(1, Math.ceil(rows.length / PAGE_SIZE));
    const page = Math.min(Math.max(0, parseInt(params.get("page") || "0", 10) || 0), pages - 1);
    const update = (key, value) => {
      const p = new URLSearchParams(params);
      if (value) p.set(key, value); else p.delete(key);
      if (key !== "page") p.delete("page");
      go(["problems"], p);
    };
    const counts = {};
    for (const r of IDX.rows) counts[r[1]] = (counts[r[1]] || 0) + 1;
    const outcomes = [...new Set([...IDX.outcomes, ...Object.keys(counts)])];
    const search = el("input", { type: "search", id: "search", placeholder: "search id, critic, level (Enter)", value: params.get("q") || "" });
    search.addEventListener("change", () => update("q", search.value));
    const pager = el("div", { class: "pager" },
      el("button", { type: "button", id: "prev", disabled: page === 0 || null, onclick: () => update("page", String(page - 1)) }, "‹ prev"),
      el("span", { id: "pageinfo" }, `page ${page + 1} of ${pages}`),
      el("button", { type: "button", id: "next", disabled: page >= pages - 1 || null, onclick: () => update("page", String(page + 1)) }, "next ›"));
    main.append(el("h2", {}, "Problems"),
      el("div", { class: "controls" }, search,
        el("label", {}, "outcome ", el("select", { id: "outcome-filter", onchange: (e) => update("outcome", e.target.value) },
          el("option", { value: "" }, "any"), outcomes.map((o) => el("option", { value: o, selected: o === outcome || null }, `${o} (${counts[o] || 0})`)))),
        el("label", {}, "critic fired ", el("select", { id: "critic-filter", onchange: (e) => update("critic", e.target.value) },
          el("option", { value: "" }, "any"), IDX.critics.map((c) => el("option", { value: c, selected: c === critic || null }, c)))),
        el("span", { id: "count" }, `${fmtInt(rows.length)} of ${fmtInt(IDX.rows.length)} problems`), pager));
    const table = el("table", { id: "problems" }, el("tr", {}, ["problem", "outcome", "iterations", "critics that fired",
      "still failing at the end", "cost", "level"].map((h) => el("th", {}, h))));
    for (const i of rows.slice(page * PAGE_SIZE, (page + 1) * PAGE_SIZE)) {
      const r = IDX.rows[i];
      table.append(el("tr", { class: "prow", "data-problem": r[0], onclick: () => go(["p", r[0]]) },
        el("td", {}, link("#/p/" + encodeURIComponent(r[0]), r[0])), el("td", {}, outcomeChip(r[1])), el("td", { class: "num" }, r[2]),
        el("td", {}, r[3].map((c) => el("span", { class: "chip" }, IDX.critics[c]))),
        el("td", {}, r[4].map((c) => el("span", { class: "chip" }, IDX.critics[c]))),
        el("td", { class: "num" }, fmtUsd(r[5])), el("td", {}, r[6])));
    }
    main.append(table);
  }

  // -- problem page --------------------------------------------------------------------------------------
  function renderProblem(main, id) {
    const i = IDX.rows.findIndex((r) => r[0] === id);
    if (i < 0) { main.append(el("p", { class: "note" }, "no problem " + id + " in this run")); return; }
    main.append(el("p", { class: "muted", id: "loading" }, "loading " + id + " …"));
    loadProblem(i).then((p) => {
      main.replaceChildren(...problemPage(p));
      const { params } = parseHash();
      const target = params.get("it") && document.getElementById("it-" + params.get("it"));
      if (target) target.scrollIntoView();
    }, (err) => { main.replaceChildren(el("p", { class: "note" }, String(err))); });
  }
  const STATE_CLASS = { pass: "s-pass", FAIL: "s-FAIL", "n/a": "s-na", gated: "s-gated", error: "s-error", "-": "s-none" };
  function matrixTable(p) {
    const t = el("table", { class: "matrix", id: "matrix" },
      el("tr", {}, el("th", {}, "critic \\ iteration"), p.iterations.map((it) => el("th", {}, link("#/p/" + encodeURIComponent(p.id) + "?it=" + it.index, String(it.index))))));
    p.critics.forEach((c, ci) => {
      t.append(el("tr", { "data-critic": c }, el("th", {}, c), p.matrix.map((row, k) => {
        const flip = p.flips[k][ci];
        const before = k > 0 ? p.matrix[k - 1][ci] : null;
        return el("td", { class: "cell " + (STATE_CLASS[row[ci]] || "") + (flip ? " flip" : ""), "data-state": row[ci],
          "data-flip": flip ? "1" : null, title: flip ? `${c}: ${before} → ${row[ci]} at iteration ${p.iterations[k].index}` : null },
          (flip ? "⇄ " : "") + row[ci]);
      })));
    });
    return t;
  }
  function problemPage(p) {
    const T = textResolver(p.texts);
    const out = [];
    out.push(el("h2", {}, "Problem ", p.id, " ", outcomeChip(p.outcome)));
    const facts = {
      outcome: `${p.outcome} after ${p.iterations.length} ${p.iterations.some((it) => it.turn && it.turn.act !== "plan") ? "turn" : "iteration"}(s) (stop reason: ${p.stop_reason})`,
      "best iteration": p.best_iteration === null ? "-" : String(p.best_iteration),
      usage: usageText(p.usage) + `; ${p.seconds.toFixed(1)} s`,
    };
    if (p.explanation) facts.explanation = p.explanation;
    if (p.error) facts.error = p.error;
    for (const [k, v] of Object.entries(p.dialogue || {})) facts[k] = v;
    for (const [k, v] of Object.entries(p.metadata)) facts[k] = typeof v === "string" ? v : JSON.stringify(v);
    out.push(labelsTable(facts));
    for (const [key, value] of Object.entries(p.extra)) out.push(el("h3", {}, key.replace(/_/g, " ")), genericValue(value));
    out.push(el("h3", {}, "Verdicts (critic by iteration; ⇄ marks a critic whose state changed since the previous iteration)"));
    out.push(p.iterations.length ? matrixTable(p) : el("p", { class: "muted" }, "no iterations recorded"));
    out.push(el("div", { class: "legend muted" }, Object.entries(STATE_CLASS).map(([s, c]) => el("span", {}, el("span", { class: "chip " + c }, s)))));
    p.iterations.forEach((it, k) => out.push(iterationSection(p, it, k, T)));
    return out;
  }
  function turnBlock(turn) {
    if (turn.act === "abstain") return el("p", {}, "declined: " + (turn.abstain_reason || ""));
    const a = turn.answer;
    return el("div", {}, el("p", {}, "question: " + (turn.question || "")),
      a ? el("p", {}, `answer (${a.user || "user"})` + (a.unnecessary ? " (the user says this was already in the request)" : "") + ": " + a.text +
        (a.revealed.length ? ` · revealed: ${a.revealed.join(", ")}` : "")) : null);
  }
  function iterationSection(p, it, k, T) {
    const sec = el("section", { class: "iteration", id: "it-" + it.index });
    const status = it.plan === null ? "no plan" + (it.format_error ? ": " + it.format_error : "")
      : `critics accepting: ${it.accepting}/${it.verdicts.length}` + (it.certified ? " (certified)" : "") +
        (it.repeat_of !== null ? ` · same plan as iteration ${it.repeat_of}` : "") +
        (p.best_iteration === it.index ? " · the problem's best plan" : "");
    const act = it.turn ? it.turn.act : "plan";
    sec.append(el("h3", {}, act === "plan" ? `Iteration ${it.index}` : `Turn ${it.index}: ${act === "question" ? "question" : "abstention"}`),
      act === "plan" ? el("p", {}, status) : turnBlock(it.turn), el("p", { class: "muted" }, "usage: " + usageText(it.usage) +
      (Object.keys(it.timings).length ? " · timings: " + Object.entries(it.timings).map(([n, s]) => `${n} ${s.toFixed(2)}s`).join(", ") : "")));
    if (it.plan !== null && it.format_error) sec.append(el("p", { class: "fault" }, "format error: " + it.format_error));
    const flipped = p.critics.filter((c, ci) => p.flips[k][ci]);
    if (k > 0) sec.append(el("p", {}, flipped.length ? "flips: " : "no critic changed state",
      flipped.map((c) => el("span", { class: "chip" }, `${c}: ${p.matrix[k - 1][p.critics.indexOf(c)]} → ${p.matrix[k][p.critics.indexOf(c)]}`))));
    const failing = it.verdicts.filter((v) => v.state === "FAIL" || v.state === "error");
    if (failing.length) {
      sec.append(el("h4", {}, "Feedback of failing critics"), el("table", { class: "feedback" },
        el("tr", {}, el("th", {}, "critic"), el("th", {}, "group"), el("th", {}, "feedback"), el("th", {}, "hint / error"), el("th", {}, "details")),
        failing.map((v) => el("tr", {}, el("td", {}, v.critic), el("td", {}, v.group),
          el("td", {}, v.feedback === null ? "" : folded(T(v.feedback))),
          el("td", {}, v.hint || "", v.error ? el("span", { class: "fault" }, "error: " + v.error) : null),
          el("td", {}, v.details === null ? "" : el("details", {}, el("summary", {}, "details"), folded(T(v.details))))))));
    }
    if (it.gated.length) sec.append(el("p", { class: "muted" }, "gated (not run because a format critic failed): " + it.gated.join(", ")));
    const prompt = it.prompt.map(([role, t]) => `[${role}]\n${T(t)}`).join("\n\n");
    sec.append(el("details", { class: "prompt" }, el("summary", {}, k === 0 ? "prompt" : "prompt (the backprompt sent at this iteration)"), folded(prompt || "(not recorded)")));
    sec.append(el("h4", {}, "Raw reply"), it.reply === null ? el("p", { class: "muted" }, "(no reply)") : folded(T(it.reply), "reply"));
    if (it.plan !== null) {
      sec.append(el("h4", {}, "Plan"));
      if (it.plan_table) {
        sec.append(el("table", { class: "plan" }, el("tr", {}, it.plan_table.columns.map((c) => el("th", {}, c))),
          it.plan_table.rows.map((r) => el("tr", {}, r.map((c) => el("td", {}, c))))));
        sec.append(el("details", {}, el("summary", {}, "plan JSON"), folded(JSON.stringify(it.plan, null, 2))));
      } else sec.append(folded(JSON.stringify(it.plan, null, 2)));
      if (it.diff !== null) sec.append(el("h4", {}, `Diff against the plan of iteration ${it.diff_against}`), diffBlock(T(it.diff)));
      else if (it.same_as !== null) sec.append(el("p", { class: "muted" }, `plan identical to the plan of iteration ${it.same_as}`));
      else sec.append(el("p", { class: "muted" }, "first plan of this problem"));
    }
    if (it.backprompt !== null) {
      sec.append(el("details", { class: "backprompt" }, el("summary", {},
        "backprompt built from these verdicts " + (it.sent ? `(sent at the next iteration)` : "(not sent: the loop stopped here)")), folded(T(it.backprompt))));
    }
    if (it.turn && it.turn.updates.length) {
      sec.append(el("h4", {}, "Updates applied after this turn"), folded(it.turn.updates.join("\n")));
      const r = it.turn.rejudged;
      if (r) sec.append(el("p", { class: r.certified ? "" : "fault" },
        `this plan against the updated problem: ${r.accepting}/${r.of} critics accept (${r.certified ? "still certified" : "no longer certified"})`),
        r.failing.length ? folded(r.failing.join("\n")) : null);
    }
    if (it.calls.length) sec.append(el("h4", {}, "LLM calls"), callsTable(it.calls, T));
    for (const [key, value] of Object.entries(it.extra)) sec.append(el("h4", {}, key.replace(/_/g, " ")), genericValue(value));
    return sec;
  }
  function callsTable(calls, T) {
    return el("table", { class: "calls" },
      el("tr", {}, ["stage", "model", "cache", "faults", "finish", "tokens in/out", "cost", "seconds", "messages and reply"].map((h) => el("th", {}, h))),
      calls.map((c) => el("tr", {}, el("td", {}, c.stage), el("td", {}, c.model), el("td", {}, !c.cached ? "miss" : c.usage.cost > 0 ? "hit (paid by this run before an interruption)" : "hit (free; would have cost " + fmtUsd(c.usage.cached_cost) + ")"),
        el("td", {}, c.faults.length ? c.faults.map((f) => el("div", { class: "fault" }, `${f.kind} (attempt ${f.attempt}${f.stage ? ", " + f.stage : ""}): ${f.message}`)) : "none"),
        el("td", {}, c.finish_reason || "-"), el("td", { class: "num" }, `${fmtInt(c.usage.tokens_in)} / ${fmtInt(c.usage.tokens_out)}`),
        el("td", { class: "num" }, fmtUsd(c.usage.cost)), el("td", { class: "num" }, c.seconds.toFixed(2)),
        el("td", {}, el("details", {}, el("summary", {}, `${c.messages.length} message(s)`),
          folded(c.messages.map(([role, t]) => `[${role}]\n${T(t)}`).join("\n\n")),
          el("div", {}, "reply:"), c.reply === null ? el("span", { class: "muted" }, "(none)") : folded(T(c.reply))),
          Object.entries(c.extra).map(([key, value]) => el("details", {}, el("summary", {}, key), genericValue(value)))))));
  }

  // -- sweep ----------------------------------------------------------------------------------------
  function renderSweep(main) {
    const o = META.overview;
    const metricNames = [...new Set(o.jobs.flatMap((j) => Object.keys(j.metrics)))];
    main.append(el("h2", {}, "Jobs (Table 1: %, 95% bootstrap intervals)"),
      el("table", { id: "jobs" }, el("tr", {}, ["job", "what differs", "method", "model", "critics", "backprompt", "budget", "finished", "status", "outcomes", ...metricNames, "$ paid (cache hits apart)"].map((h) => el("th", {}, h))),
        o.jobs.map((j) => el("tr", {}, el("td", {}, link(j.link, j.name)), el("td", {}, j.differs), el("td", {}, j.labels.method), el("td", {}, j.labels.model),
          el("td", {}, j.labels.critics), el("td", {}, j.labels.backprompt), el("td", {}, j.labels.budget),
          el("td", { class: "num" }, `${j.n_finished}/${j.n_problems}`), el("td", {}, j.status),
          el("td", {}, Object.entries(j.outcomes).map(([k, v]) => el("span", { class: "chip" }, `${k} ${v}`))),
          metricNames.map((m) => el("td", { class: "num" }, j.metrics[m] ? metricText(j.kinds[m], j.metrics[m], j.counts[m]) : "-")),
          el("td", { class: "num" }, costText(j.usage) + (j.usage.cached ? ` (+ ${fmtUsd(j.usage.cached_cost)} in ${j.usage.cached} cache hit(s))` : ""))))));
    for (const j of o.jobs) for (const n of j.notes) main.append(el("div", { class: "note" }, `${j.name}: ${n}`));
    main.append(el("h2", {}, "Paired comparisons (each job against the first job of its benchmark; per problem, on the metric named)"));
    if (!o.comparisons.length) main.append(el("p", { class: "muted" }, "none: fewer than two jobs per benchmark"));
    else main.append(el("table", { id: "comparisons" }, el("tr", {}, ["A", "B", "metric", "problems", "A", "B", "only A", "only B", "B − A (95% CI)", "McNemar p", "bootstrap p", "note"].map((h) => el("th", {}, h))),
      o.comparisons.map((c) => el("tr", {}, el("td", {}, c.a), el("td", {}, c.b), el("td", {}, c.metric),
        el("td", { class: "num" }, c.n === undefined ? "-" : c.n),
        el("td", { class: "num" }, c.rate_a === undefined ? "-" : pct(c.rate_a)), el("td", { class: "num" }, c.rate_b === undefined ? "-" : pct(c.rate_b)),
        el("td", { class: "num" }, c.only_a ?? "-"), el("td", { class: "num" }, c.only_b ?? "-"),
        el("td", { class: "num" }, c.difference ? interval(c.difference) : "-"),
        el("td", { class: "num" }, c.mcnemar_p === undefined || c.mcnemar_p === null ? "-" : c.mcnemar_p.toFixed(4)),
        el("td", { class: "num" }, c.bootstrap_p === undefined || c.bootstrap_p === null ? "-" : c.bootstrap_p.toFixed(4)),
        el("td", { class: "muted" }, c.note || "")))));
  }

  // -- live refresh (modulo view --serve) ------------------------------------------------------------------
  if (META.live) {
    setInterval(() => {
      fetch("__version", { cache: "no-store" }).then((r) => r.json()).then((v) => {
        if (v.version !== META.version) location.reload();
      }).catch(() => { const s = document.getElementById("live"); if (s) s.textContent = "live: server not answering"; });
    }, 2000);
  }
  render();
  // when the first view was on screen (read by benchmarks/view_speed.py)
  window.moduloRenderedAt = performance.now();
})();
