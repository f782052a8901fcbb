// Custos reviewer inbox: vanilla JavaScript, no build step, no dependencies.
// Every value from the server is rendered as text (text nodes and
// textContent only, never parsed as HTML); the server's Content-Security-Policy forbids inline script.
"use strict";

(function () {
  const $ = (id) => document.getElementById(id);

  // ---- state ----
  const state = {
    me: null,          // {actor, roles, csrf_token}
    pending: new Map(), // request id -> request
    tallies: new Map(), // request id -> quorum tally (custos.dev/quorum)
    seq: -1,           // last applied sequence
    es: null,          // EventSource
    open: null,        // id of the request shown in detail
    resolved: new Map(), // request id -> resolution seen live
    stream: "web-" + hex(6),
    nextSeq: 1,
    drafts: new Map(), // request id -> justification being written
    selected: new Set(), // request ids chosen for a bulk decision
    shown: [],         // ids of the pending requests the filters let through, in list order
    search: "",        // the history search's query string ("" = the latest)
    next: "",          // the history's next_cursor
  };

  // ---- helpers ----
  function hex(n) {
    const b = new Uint8Array(n);
    crypto.getRandomValues(b);
    return Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
  }

  // visible shows control, bidi and zero-width characters as ⟨U+XXXX⟩ so a
  // value cannot hide or reorder what the reviewer reads.
  const hidden = /[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f-\u009f\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]/g;
  function visible(s) {
    return String(s).replace(hidden, (c) => "⟨U+" + c.charCodeAt(0).toString(16).toUpperCase().padStart(4, "0") + "⟩");
  }

  // el builds an element; string children become text nodes.
  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k === "class") e.className = v;
      else if (k === "text") e.textContent = visible(v);
      else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, v === true ? "" : String(v));
    }
    for (const c of children) {
      if (c === undefined || c === null || c === false) continue;
      e.append(typeof c === "string" || typeof c === "number" ? document.createTextNode(visible(c)) : c);
    }
    return e;
  }

  function clear(node) {
    while (node.firstChild) node.removeChild(node.firstChild);
  }

  function announce(msg) {
    $("announce").textContent = msg;
  }

  // api calls the server. body is a value to send as JSON, or a RawJSON
  // whose text is sent as it is.
  async function api(method, path, body) {
    const headers = { Accept: "application/json" };
    if (body !== undefined) headers["Content-Type"] = "application/json";
    if (method !== "GET" && state.me && state.me.csrf_token) headers["X-CSRF-Token"] = state.me.csrf_token;
    const resp = await fetch(path, {
      method, headers, credentials: "same-origin", cache: "no-store",
      body: body === undefined ? undefined : (body instanceof RawJSON ? body.text : JSON.stringify(body)),
    });
    let data = null;
    const text = await resp.text();
    if (text) {
      try { data = JSON.parse(text); } catch (e) { data = { detail: text }; }
    }
    if (resp.status === 401 && path !== "/login") {
      signedOut("Your session has ended. Please sign in again.");
    }
    return { status: resp.status, ok: resp.ok, data };
  }

  function RawJSON(text) { this.text = text; }

  function problemText(r) {
    const d = r.data || {};
    let s = d.detail || d.title || ("HTTP " + r.status);
    if (d.agent_status && d.agent_status.name) s += " (" + d.agent_status.name + ")";
    return s;
  }

  function fmtTime(s) {
    if (!s) return "";
    const d = new Date(s);
    if (isNaN(d)) return s;
    return d.toLocaleString();
  }

  function left(deadline) {
    const ms = new Date(deadline) - Date.now();
    if (ms <= 0) return { text: "expired", soon: true };
    const s = Math.floor(ms / 1000);
    const h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60), sec = s % 60;
    const text = (h ? h + "h " : "") + (h || m ? m + "m " : "") + sec + "s left";
    return { text, soon: ms < 60000 };
  }

  function countdown(deadline) {
    if (!deadline) return el("span", { class: "muted" }, "no deadline");
    return el("span", { class: "countdown", "data-deadline": deadline, "aria-label": "time left" }, left(deadline).text);
  }

  function tick() {
    for (const c of document.querySelectorAll("[data-deadline]")) {
      const l = left(c.getAttribute("data-deadline"));
      c.textContent = l.text;
      c.classList.toggle("soon", l.soon);
    }
  }

  // supersedesOf is the custos.dev/supersedes extension of a request made
  // by editing another one's arguments, or null.
  function supersedesOf(req) {
    const x = req.extensions && req.extensions["custos.dev/supersedes"];
    return x && typeof x.request_id === "string" ? x : null;
  }

  function supersededByOf(res) {
    const x = res && res.extensions && res.extensions["custos.dev/superseded_by"];
    return x && typeof x.request_id === "string" ? x : null;
  }

  // ---- risk: the handler's, raised by what the profile demands ----
  // A request's risk level comes from its handler (what the call does);
  // its compliance profile can demand more (EU-AI-ACT-HIGH-RISK through
  // the echo handler is still a high-risk system's call). The level shown
  // is the higher of the two, and the detail says where each comes from.
  const RISK_ORDER = ["low", "medium", "high", "critical"];
  const OVERSIGHT_RISK = { required_before_execution: "high", required_post_execution: "medium", required_within_24h: "medium" };
  let profileOversight = {};
  async function loadProfiles() {
    try {
      const r = await fetch("/ui/profiles.json", { credentials: "same-origin" });
      if (r.ok) profileOversight = (await r.json()).human_oversight || {};
    } catch (e) { /* the handler's level alone */ }
  }
  function riskOf(req) {
    const handler = req.risk.level;
    const profile = profileOf(req);
    const oversight = profileOversight[profile] || "";
    const floor = OVERSIGHT_RISK[oversight];
    const raised = !!floor && RISK_ORDER.indexOf(floor) > RISK_ORDER.indexOf(handler);
    return { level: raised ? floor : handler, handler, profile, oversight, raised };
  }
  function riskWhy(k) {
    if (k.raised) return "the profile " + k.profile + " demands human oversight " + k.oversight + "; the handler alone: " + k.handler;
    return k.profile && k.oversight ? "the handler's; the profile " + k.profile + " demands human oversight " + k.oversight : "the handler's";
  }

  // ---- execution: what came of an approved gateway request ----
  // A gateway's approval request apr_X belongs to exchange exc_X, whose
  // status URL answers its reply. Final answers are kept.
  const executions = new Map(); // request id -> {text, cls}
  async function executionOf(requestId) {
    if (!/^apr_[A-Za-z0-9_-]+$/.test(requestId)) return null;
    if (executions.has(requestId)) return executions.get(requestId);
    let resp, env = null;
    try {
      resp = await fetch("/v1/arsia/exchanges/exc_" + requestId.slice(4), { credentials: "same-origin", cache: "no-store", headers: { Accept: "application/arsia+json, application/json" } });
      env = await resp.json().catch(() => null);
    } catch (e) { return null; }
    if (resp.status === 404) return null;
    let x;
    if (resp.status === 202) x = { text: "not run yet (queued or running)", cls: "pending", final: false };
    else if (env && env.intent === "response") x = { text: "ran: succeeded (HTTP " + resp.status + ")", cls: "good", final: true };
    else if (env && env.intent === "error") {
      const e = (env.payload && env.payload.error) || {};
      const st = e.details && e.details.agent_status;
      const code = st && st.code;
      if (code === 6005) x = { text: "interrupted: the outcome is unknown (ASC 6005); check before retrying", cls: "bad", final: true };
      else x = { text: "did not succeed: " + (e.code || "error") + (code ? " (ASC " + code + ")" : "") + (e.description ? " — " + e.description : ""), cls: "bad", final: true };
    } else return null;
    if (x.final) executions.set(requestId, x);
    return x;
  }

  function openRequest(id) {
    location.hash = "#/request/" + encodeURIComponent(id);
  }

  // questionOf is the prompt of a request that asks a question
  // (extension custos.dev/question) rather than permission, or "".
  function questionOf(req) {
    const x = req.extensions && req.extensions["custos.dev/question"];
    if (!x || typeof x !== "object") return "";
    return typeof x.prompt === "string" && x.prompt ? x.prompt : req.action.summary;
  }

  function profileOf(req) {
    const x = req.extensions && req.extensions["custos.dev/exchange"];
    return x && typeof x.profile === "string" ? x.profile : "";
  }

  // ---- sign-in ----
  function showLogin(msg) {
    $("app-view").hidden = true;
    $("whoami").hidden = true;
    $("login-view").hidden = false;
    $("login-error").textContent = msg || "";
    $("login-id").focus();
  }

  function signedOut(msg) {
    state.me = null;
    if (state.es) { state.es.close(); state.es = null; }
    showLogin(msg);
  }

  async function login(body, button) {
    button.disabled = true;
    $("login-error").textContent = "";
    try {
      const r = await api("POST", "/login", body);
      if (!r.ok) {
        $("login-error").textContent = r.status === 401 ? "Wrong id, password or token." : problemText(r);
        return;
      }
      state.me = r.data;
      $("login-pass").value = "";
      $("login-token-value").value = "";
      start();
    } catch (e) {
      $("login-error").textContent = "The server could not be reached.";
    } finally {
      button.disabled = false;
    }
  }

  $("login-password").addEventListener("submit", (ev) => {
    ev.preventDefault();
    login({ id: $("login-id").value.trim(), password: $("login-pass").value }, $("login-password-submit"));
  });
  $("login-token").addEventListener("submit", (ev) => {
    ev.preventDefault();
    login({ token: $("login-token-value").value.trim() }, $("login-token-submit"));
  });
  $("logout").addEventListener("click", async () => {
    await api("POST", "/logout");
    signedOut("You signed out.");
  });

  // ---- the live list ----
  function start() {
    $("login-view").hidden = true;
    $("app-view").hidden = false;
    $("whoami").hidden = false;
    const a = state.me.actor;
    $("whoami-name").textContent = visible(a.display_name ? a.display_name + " (" + a.id + ")" : a.id);
    $("whoami-roles").textContent = state.me.roles && state.me.roles.length ? "roles: " + visible(state.me.roles.join(", ")) : "";
    loadProfiles().then(() => { renderList(); if (state.open) renderDetail(); });
    connect();
    loadHistory();
    loadRules();
    loadReviews();
    setInterval(loadReviews, 30000);
    route();
  }

  function setLive(s, text) {
    const l = $("live");
    l.setAttribute("data-state", s);
    l.textContent = text;
  }

  // connect opens the event stream; it starts with a snapshot.
  function connect() {
    if (state.es) state.es.close();
    state.seq = -1;
    setLive("connecting", "connecting…");
    const es = new EventSource("/approvals/events");
    state.es = es;
    es.addEventListener("open", () => setLive("live", "live"));
    es.addEventListener("error", async () => {
      setLive("connecting", "reconnecting…");
      if (es.readyState === EventSource.CLOSED) {
        // Refused (signed out, or the server went away): check why. A 401
        // shows the sign-in form; otherwise try again shortly.
        const r = await api("GET", "/approvals/me").catch(() => null);
        if ((!r || r.ok) && state.es === es) setTimeout(() => { if (state.es === es) connect(); }, 3000);
      }
    });
    es.addEventListener("approval.snapshot", (ev) => {
      const m = JSON.parse(ev.data);
      state.pending.clear();
      state.tallies.clear();
      for (const r of m.snapshot.pending) state.pending.set(r.id, r);
      const tallies = (m.extensions && m.extensions[QUORUM]) || {};
      for (const id of Object.keys(tallies)) state.tallies.set(id, tallies[id]);
      state.seq = m.snapshot.as_of_sequence;
      renderList();
      if (state.open) renderDetail();
    });
    es.addEventListener("gap", () => {
      // The stream restarts with a fresh snapshot right after a gap.
      state.seq = -1;
    });
    for (const type of ["approval.requested", "approval.resolved", "approval.activity"]) {
      es.addEventListener(type, (ev) => apply(JSON.parse(ev.data), es));
    }
  }

  function apply(m, es) {
    if (m.type === "approval.activity") {
      const tally = m.extensions && m.extensions[QUORUM];
      if (state.open === m.activity.request_id) {
        const log = $("activity-log");
        if (log) log.append(el("li", {}, m.activity.message));
      }
      // A partial vote of a quorum is recorded in the log: it takes a
      // sequence like any event. Other activity is not.
      if (!tally) return;
      if (state.seq >= 0 && m.sequence === state.seq + 1) state.seq = m.sequence;
      else if (state.seq >= 0 && m.sequence > state.seq + 1 && state.es === es) { connect(); return; }
      state.tallies.set(m.activity.request_id, tally);
      renderList();
      if (state.open === m.activity.request_id) renderQuorum();
      return;
    }
    if (state.seq < 0 || m.sequence <= state.seq) return; // before the snapshot, or already seen
    if (m.sequence !== state.seq + 1) {
      // Missed events: take a new snapshot.
      if (state.es === es) connect();
      return;
    }
    state.seq = m.sequence;
    if (m.type === "approval.requested") {
      state.pending.set(m.request.id, m.request);
      announce("New request: " + m.request.action.name);
      renderList();
      if (state.open === m.request.id) renderDetail();
    } else if (m.type === "approval.resolved") {
      const res = m.resolution;
      state.resolved.set(res.request_id, res);
      state.pending.delete(res.request_id);
      renderList();
      if (state.open === res.request_id) renderDetail();
      if (!state.search) loadHistory();
      loadRules();
    }
  }

  // ---- quorum (several approvals: extension custos.dev/quorum) ----
  const QUORUM = "custos.dev/quorum";
  function quorumOf(r) {
    const q = r.extensions && r.extensions[QUORUM];
    return q && (q.approvals_required > 1 || (q.from_roles || []).length) ? q : null;
  }
  function quorumLine(r) {
    const q = quorumOf(r);
    const t = state.tallies.get(r.id);
    const n = t ? t.approvals.length : 0;
    return n + " of " + q.approvals_required + " approvals";
  }
  function renderQuorum() {
    const box = $("detail-quorum");
    const req = state.pending.get(state.open);
    if (!box || !req) return;
    const q = quorumOf(req);
    const t = state.tallies.get(req.id) || { approvals: [], denials: [] };
    clear(box);
    const roles = (q.from_roles || []).length ? ", one each from " + q.from_roles.join(", ") : "";
    box.append(el("p", {}, quorumLine(req) + " (" + q.approvals_required + " distinct reviewers" + roles +
      "; " + (q.deny === "quorum" ? "denials are counted too" : "one denial denies it") + ")."));
    const votes = (t.approvals || []).concat(t.denials || []);
    if (votes.length) {
      box.append(el("ul", {}, ...votes.map((v) => el("li", {},
        (v.decision === "approve" ? "Approved by " : "Denied by ") + (v.actor.display_name || v.actor.id) +
        ((v.roles || []).length ? " (" + v.roles.join(", ") + ")" : "") + " at " + fmtTime(v.decided_at) +
        (v.justification ? ": " + v.justification : "")))));
    }
  }

  // ---- the pending list: filters (on the snapshot), selection ----
  // passes reports whether request r gets through the filters.
  function passes(r) {
    const text = $("filter-text").value.trim().toLowerCase();
    const prof = $("filter-profile").value;
    const risk = $("filter-risk").value;
    const age = Number($("filter-age").value || 0);
    if (text && !(r.action.name.toLowerCase().includes(text) || (r.origin.agent_id || "").toLowerCase().includes(text))) return false;
    if (prof && profileOf(r) !== (prof === "-" ? "" : prof)) return false;
    if (risk && riskOf(r).level !== risk) return false;
    if (age && Date.now() - new Date(r.created_at) < age * 1000) return false;
    return true;
  }

  // profileOptions keeps the profile filter's options those of the
  // requests pending (and the one chosen).
  function profileOptions(reqs) {
    const sel = $("filter-profile");
    const want = new Set(reqs.map((r) => profileOf(r) || "-"));
    if (sel.value) want.add(sel.value);
    const have = Array.from(sel.options).slice(1).map((o) => o.value);
    const list = Array.from(want).sort();
    if (have.join("\n") === list.join("\n")) return;
    const keep = sel.value;
    while (sel.options.length > 1) sel.remove(1);
    for (const p of list) sel.append(el("option", { value: p }, p === "-" ? "no profile" : p));
    sel.value = keep;
  }

  function renderList() {
    const list = $("pending-list");
    clear(list);
    const all = Array.from(state.pending.values()).sort((a, b) => (a.created_at < b.created_at ? -1 : 1));
    for (const id of state.selected) if (!state.pending.has(id)) state.selected.delete(id);
    profileOptions(all);
    const reqs = all.filter(passes);
    state.shown = reqs.map((r) => r.id);
    $("pending-count").textContent = String(all.length);
    $("pending-empty").hidden = all.length > 0;
    $("pending-shown").textContent = all.length && reqs.length !== all.length ? reqs.length + " of " + all.length + " shown (filtered)" : "";
    for (const r of reqs) {
      const a = r.action;
      const profile = profileOf(r);
      const risk = riskOf(r);
      const b = el("button", {
        type: "button", class: "item", "data-request": r.id,
        "aria-current": state.open === r.id ? "true" : null,
        onclick: () => { location.hash = "#/request/" + encodeURIComponent(r.id); },
      },
      el("div", { class: "item-title" }, a.summary),
      el("div", { class: "item-meta" },
        el("span", { class: "risk risk-" + risk.level, title: "risk: " + riskWhy(risk) }, risk.level),
        el("span", { class: "mono" }, a.name),
        questionOf(r) ? el("span", { class: "tag" }, "question") : null,
        supersedesOf(r) ? el("span", { class: "tag" }, "edited by " + supersedesOf(r).proposed_by.id) : null,
        profile ? el("span", {}, profile) : null,
        quorumOf(r) ? el("span", { class: "tag", "data-quorum": r.id }, quorumLine(r)) : null,
        el("span", {}, "from " + (r.origin.agent_id || r.origin.session_id)),
        countdown(r.expires_at)));
      const box = el("input", { type: "checkbox", "data-select": r.id, "aria-label": "Select " + a.name + " (" + r.id + ")",
        onchange: (ev) => { if (ev.target.checked) state.selected.add(r.id); else state.selected.delete(r.id); renderBulk(); } });
      box.checked = state.selected.has(r.id);
      list.append(el("li", { class: "pending-row" }, box, b));
    }
    renderBulk();
  }

  function renderBulk() {
    $("bulk-bar").hidden = state.selected.size === 0;
    $("bulk-count").textContent = String(state.selected.size);
  }

  for (const id of ["filter-text", "filter-profile", "filter-risk", "filter-age"]) {
    $(id).addEventListener("input", () => renderList());
  }
  $("pending-filters").addEventListener("submit", (ev) => ev.preventDefault());
  $("bulk-clear").addEventListener("click", () => { state.selected.clear(); renderList(); });
  $("bulk-approve").addEventListener("click", () => bulkDecide("approve"));
  $("bulk-deny").addEventListener("click", () => bulkDecide("deny"));

  // postDecision posts one approval.decided for req through the one
  // decision endpoint: the policy (roles, separation of duties,
  // justification, quorum) runs on it as on any other decision.
  function postDecision(req, choice, text, extra) {
    const now = new Date().toISOString();
    const decision = {
      id: "dec_" + hex(16), request_id: req.id, action_digest: req.action_digest, decided_at: now,
      decision: choice.decision, scope: choice.scope,
      // The server records the signed-in reviewer, whatever this says.
      actor: { id: state.me.actor.id, type: "human" },
    };
    const ext = Object.assign({}, extra || {});
    if (text) ext["custos.dev/justification"] = text;
    if (Object.keys(ext).length) decision.extensions = ext;
    const env = { aais: "1.0", type: "approval.decided", id: "evt_" + hex(16), occurred_at: now,
      sequence: state.nextSeq++, stream: state.stream, decision };
    return api("POST", "/approvals/" + encodeURIComponent(req.id) + "/decisions", env);
  }

  // outcomeOf says what one decision's answer came to: {good, text}.
  function outcomeOf(r) {
    if (r.ok && r.data && r.data.type === "approval.activity") return { good: true, text: "vote recorded: " + r.data.activity.message };
    if (r.data && r.data.resolution) {
      const res = r.data.resolution;
      if (r.ok) state.resolved.set(res.request_id, res);
      return { good: r.ok && (res.outcome === "approved" || res.outcome === "denied"), text: res.outcome + ": " + res.message };
    }
    return { good: false, text: "refused: " + problemText(r) };
  }

  // bulkDecide decides every selected request, one decision each, and
  // reports each one's result: some may be refused.
  async function bulkDecide(verdict) {
    const ids = Array.from(state.selected).filter((id) => state.pending.has(id));
    if (!ids.length) return;
    const text = $("bulk-justification").value.trim();
    const out = $("bulk-results");
    clear(out);
    for (const b of $("bulk-bar").querySelectorAll("button")) b.disabled = true;
    let good = 0;
    for (const id of ids) {
      const req = state.pending.get(id);
      const line = (ok, msg) => {
        out.append(el("li", { class: ok ? "good" : "bad", "data-result": id }, (req ? req.action.name + " " : "") + "(" + id + "): " + msg));
        if (ok) good++;
      };
      if (!req) { line(false, "no longer pending"); continue; }
      const choice = req.choices.find((c) => c.decision === verdict && c.scope === "once");
      if (!choice) { line(false, "not sent: the request does not offer " + verdict + " once"); continue; }
      let r;
      try { r = await postDecision(req, choice, text); } catch (e) { line(false, "the server could not be reached"); continue; }
      const o = outcomeOf(r);
      line(o.good, o.text);
      if (o.good) state.selected.delete(id);
    }
    for (const b of $("bulk-bar").querySelectorAll("button")) b.disabled = false;
    announce(good + " of " + ids.length + " decided; see the results.");
    renderList();
  }

  // ---- keyboard shortcuts: never while typing ----
  function typing(t) {
    return !!t && (t.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(t.tagName));
  }
  function move(by) {
    const ids = state.shown;
    if (!ids.length) return;
    let i = ids.indexOf(state.open);
    i = i < 0 ? (by > 0 ? 0 : ids.length - 1) : Math.min(ids.length - 1, Math.max(0, i + by));
    openRequest(ids[i]);
  }
  function pressChoice(decision) {
    const b = document.querySelector('#detail-body button[data-decision="' + decision + '"][data-scope="once"]');
    if (b && !b.disabled) b.click();
    else announce("No " + decision + " once for the open request.");
  }
  document.addEventListener("keydown", (ev) => {
    if (!state.me || ev.ctrlKey || ev.metaKey || ev.altKey || ev.isComposing) return;
    if (ev.key === "Escape" && typing(ev.target)) { ev.target.blur(); return; }
    if (typing(ev.target) || $("keys-help").open) return;
    switch (ev.key) {
      case "j": move(1); break;
      case "k": move(-1); break;
      case "x":
        if (state.open && state.pending.has(state.open)) {
          if (state.selected.has(state.open)) state.selected.delete(state.open); else state.selected.add(state.open);
          renderList();
        }
        break;
      case "a": pressChoice("approve"); break;
      case "d": pressChoice("deny"); break;
      case "/": $("filter-text").focus(); break;
      case "?": $("keys-help").showModal(); break;
      default: return;
    }
    ev.preventDefault();
  });

  // ---- routing ----
  function route() {
    const m = location.hash.match(/^#\/request\/(.+)$/);
    state.open = m ? decodeURIComponent(m[1]) : null;
    document.body.classList.toggle("detail-open", !!state.open);
    $("detail-pane").hidden = !state.open;
    renderList();
    if (state.open) {
      renderDetail();
      $("detail-title").focus();
    }
  }
  window.addEventListener("hashchange", () => { if (state.me) route(); });
  $("detail-back").addEventListener("click", (ev) => {
    ev.preventDefault();
    const id = state.open;
    history.pushState(null, "", location.pathname);
    route();
    const b = id && document.querySelector('[data-request="' + CSS.escape(id) + '"]');
    if (b) b.focus(); else $("main").focus();
  });

  // ---- the detail view ----
  const scopeWords = {
    "approve/once": "Approves this one request only. The next request, even an identical one, will ask again.",
    "approve/session": "Approves this request and remembers the approval for the rest of the agent's session: later requests of the same session that match the conditions below are approved without asking.",
    "approve/persistent": "Approves this request and creates a lasting rule: later requests that match the conditions below are approved without asking, until the rule is revoked or expires.",
    "deny/once": "Refuses this request. The action does not run; the agent has to ask again.",
    "cancel/once": "Withdraws this request without approving or denying it. The action does not run.",
  };

  function constraintWords(c) {
    const out = [];
    const j = (v) => JSON.stringify(v);
    for (const [k, v] of Object.entries(c || {})) {
      switch (k) {
        case "action_name": out.push("the action is named " + v); break;
        case "action_kind": out.push("the action is of kind " + v); break;
        case "action_digest": out.push("the action is exactly this one (" + v + ")"); break;
        case "resource_prefix": out.push("the resource starts with " + v); break;
        case "working_directory_prefix": out.push("the working directory is under " + v); break;
        case "command_prefix": out.push("the command starts with " + j(v) + " and has no shell metacharacters after it"); break;
        case "origin_harness": out.push("it comes from harness " + v); break;
        case "origin_session": out.push("it comes from session " + v); break;
        case "origin_project": out.push("it belongs to project " + v); break;
        case "expires_at": out.push("until " + fmtTime(v)); break;
        case "argument_equals":
          for (const [p, x] of Object.entries(v)) out.push("argument " + p + " equals " + j(x));
          break;
        case "argument_prefix":
          for (const [p, x] of Object.entries(v)) out.push("argument " + p + " starts with " + j(x));
          break;
        case "argument_glob":
          for (const [p, x] of Object.entries(v)) out.push("argument " + p + " matches " + j(x));
          break;
        case "argument_range":
          for (const [p, x] of Object.entries(v)) out.push("argument " + p + " is a number with " + String(x));
          break;
        default: out.push(k + " = " + j(v));
      }
    }
    return out;
  }

  function fact(dl, name, value) {
    if (value === undefined || value === null || value === "") return;
    dl.append(el("dt", {}, name), el("dd", {}, value));
  }

  async function renderDetail() {
    const id = state.open;
    const body = $("detail-body");
    const req = state.pending.get(id);
    clear(body);
    if (!req) {
      const res = state.resolved.get(id);
      $("detail-title").textContent = visible(res ? "Request resolved" : "Request not pending");
      if (res) {
        body.append(el("p", { class: "notice " + (res.outcome === "approved" ? "good" : "bad"), id: "detail-outcome" },
          "Outcome: " + res.outcome + (res.effective_scope ? " (" + res.effective_scope + ")" : "") + ". " + res.message));
        if (res.outcome === "approved") {
          const ex = el("p", { id: "detail-execution", class: "muted" }, "Execution: checking…");
          body.append(ex);
          executionOf(id).then((x) => {
            if (!x) { ex.remove(); return; }
            ex.className = "notice " + x.cls;
            ex.textContent = visible("Execution: " + x.text);
            if (!x.final) setTimeout(() => { if (state.open === id && !state.pending.has(id)) renderDetail(); }, 1500);
          });
        }
        const sup = supersededByOf(res);
        if (sup) {
          body.append(el("p", { id: "detail-superseded" }, "Superseded by ",
            el("a", { href: "#/request/" + encodeURIComponent(sup.request_id) }, sup.request_id),
            ": " + ((sup.actor && sup.actor.id) || "a reviewer") + " proposed other arguments, which need their own decision."));
        }
      } else {
        body.append(el("p", { class: "muted" }, "This request is no longer pending (resolved, expired or unknown). See the resolved list."));
      }
      return;
    }
    const a = req.action;
    const profile = profileOf(req);
    $("detail-title").textContent = visible(a.summary);
    body.append(el("p", { class: "untrusted" }, "The title above is the agent's own summary. What will run is below."));
    const sup = supersedesOf(req);
    if (sup) {
      body.append(el("p", { class: "notice", id: "detail-edited" },
        "Edited: " + ((sup.proposed_by && sup.proposed_by.id) || "a reviewer") + " proposed these arguments in place of request ",
        el("a", { href: "#/request/" + encodeURIComponent(sup.request_id) }, sup.request_id),
        (sup.justification ? ". Reason: " + sup.justification : "") +
        ". The agent's summary may describe the original arguments; check the arguments below."));
    }

    const pres = a.presentation || {};
    if (pres.redacted) {
      body.append(el("p", { class: "redacted" }, "Some values are redacted. Bound to: " + (pres.binding_hint || "")));
    }

    body.append(el("h3", {}, "What will run"));
    const run = el("dl", { class: "facts" });
    fact(run, "Kind", el("code", {}, a.kind));
    fact(run, "Name", el("code", {}, a.name));
    fact(run, "Resource", a.resource);
    fact(run, "Working directory", a.working_directory && el("code", {}, a.working_directory));
    if (a.effects && a.effects.length) fact(run, "Effects", el("ul", {}, ...a.effects.map((e) => el("li", {}, e))));
    fact(run, "Details", pres.details);
    body.append(run);
    body.append(el("h3", {}, "Arguments"), el("pre", { id: "detail-args", tabindex: "0", "aria-label": "arguments" }, JSON.stringify(a.arguments, null, 2)));

    body.append(el("h3", {}, "Request"));
    const meta = el("dl", { class: "facts" });
    const risk = riskOf(req);
    fact(meta, "Risk", el("span", { id: "detail-risk" }, el("span", { class: "risk risk-" + risk.level }, risk.level), " " + riskWhy(risk)));
    fact(meta, "Reasons", el("ul", {}, ...req.risk.reasons.map((r) => el("li", {}, r))));
    fact(meta, "Compliance profile", profile || "none");
    fact(meta, "Harness", req.origin.harness);
    fact(meta, "Session", req.origin.session_id);
    fact(meta, "Agent", req.origin.agent_id);
    fact(meta, "Project", req.origin.project);
    fact(meta, "Run", req.origin.run_id);
    fact(meta, "Requested", fmtTime(req.created_at));
    fact(meta, "Deadline", req.expires_at ? el("span", {}, fmtTime(req.expires_at) + " — ", countdown(req.expires_at)) : "none");
    fact(meta, "Action digest", el("code", { id: "detail-digest" }, req.action_digest));
    fact(meta, "Request id", el("code", {}, req.id));
    body.append(meta);
    if (quorumOf(req)) {
      body.append(el("h3", {}, "Approvals"), el("div", { id: "detail-quorum" }));
      renderQuorum();
    }
    body.append(el("ul", { id: "activity-log", class: "muted" }));

    body.append(el("h3", {}, "Your decision"));
    const permBox = el("div", {});
    body.append(permBox);
    const r = await api("GET", "/approvals/" + encodeURIComponent(id) + "/permission");
    if (state.open !== id || !state.pending.has(id)) return;
    const perm = r.ok ? r.data : { decide: false, approve: false, reason: problemText(r) };
    if (perm.reason) permBox.append(el("p", { class: "notice bad", id: "detail-permission" }, perm.reason));

    const just = el("textarea", { id: "justification", maxlength: "2000", "aria-describedby": "justification-hint",
      required: perm.justification_required ? true : null });
    permBox.append(el("div", { class: "field" },
      el("label", { for: "justification" }, "Justification" + (perm.justification_required ? " (required to approve)" : " (optional)")),
      just,
      el("p", { class: "hint", id: "justification-hint" }, perm.justification_required
        ? "Profile " + profile + " requires a written reason for every approval. It is recorded with your decision."
        : "Recorded with your decision.")));
    const result = el("p", { id: "decision-result", role: "status" });
    just.value = state.drafts.get(id) || "";
    just.addEventListener("input", () => {
      state.drafts.set(id, just.value);
      if (result.className === "error") { result.textContent = ""; result.className = ""; }
    });
    const choices = el("ul", { class: "choices" });
    for (const c of req.choices) {
      const key = c.decision + "/" + c.scope;
      const allowed = perm.decide && (c.decision !== "approve" || perm.approve);
      const cons = constraintWords(c.scope_constraints);
      const btn = el("button", {
        type: "button", class: c.decision === "approve" ? "" : (c.decision === "deny" ? "danger" : "secondary"),
        "data-decision": c.decision, "data-scope": c.scope, disabled: allowed ? null : true,
        onclick: () => decide(req, c, just, result, choices),
      }, c.label);
      choices.append(el("li", { class: "choice" }, btn,
        el("p", {}, scopeWords[key] || (c.decision + ", scope " + c.scope)),
        cons.length ? el("p", {}, "Conditions: " + cons.join("; ") + ".") : null));
    }
    const prompt = questionOf(req);
    if (prompt) permBox.append(replyForm(req, perm, just, result));
    permBox.append(choices, result);
    if (perm.edit) permBox.append(editForm(req, perm, profile));
  }

  // ---- respond: a reply to a question ----
  // replyForm answers a request that asks a question: the reply is an
  // approval carrying custos.dev/response, through the decision endpoint
  // and its policy; the receipt carries it to the agent.
  function replyForm(req, perm, just, result) {
    const text = el("textarea", { id: "response", maxlength: "4000", "aria-describedby": "response-hint" });
    const send = el("button", { type: "submit", id: "respond-submit", disabled: perm.decide && perm.approve ? null : true }, "Send reply");
    const form = el("form", { id: "respond-form", class: "choice", novalidate: true },
      el("p", { class: "notice", id: "question-prompt" }, "The agent asks: " + questionOf(req)),
      el("div", { class: "field" }, el("label", { for: "response" }, "Your reply"), text,
        el("p", { class: "hint", id: "response-hint" }, "The agent receives it with the receipt; it is recorded with your decision.")),
      send);
    form.addEventListener("submit", async (ev) => {
      ev.preventDefault();
      const reply = text.value.trim();
      if (!reply) { result.className = "error"; result.textContent = "Write a reply first."; text.focus(); return; }
      if (just.required && !just.value.trim()) { result.className = "error"; result.textContent = "Write a justification first."; just.focus(); return; }
      const choice = req.choices.find((c) => c.decision === "approve" && c.scope === "once");
      if (!choice) { result.className = "error"; result.textContent = "This request offers no reply (approve once)."; return; }
      send.disabled = true;
      const r = await postDecision(req, choice, just.value.trim(), { "custos.dev/response": reply });
      const o = outcomeOf(r);
      result.className = o.good ? "notice good" : "error";
      result.textContent = visible(o.good ? "Reply sent. " + o.text : o.text);
      if (!o.good) send.disabled = false;
      else { state.drafts.delete(req.id); announce("Reply sent"); }
    });
    return form;
  }

  // ---- edit, then approve ----
  // editForm proposes other arguments: the server cancels this request as
  // superseded and creates a new one, which needs its own decision (under
  // separation of duties, by someone else).
  function editForm(req, perm, profile) {
    const box = el("details", { id: "edit-box", class: "edit-box" }, el("summary", {}, "Edit arguments"));
    const args = el("textarea", { id: "edit-args", class: "mono", spellcheck: "false", rows: "10",
      "aria-describedby": "edit-args-hint" });
    args.value = JSON.stringify(req.action.arguments, null, 2);
    const why = el("textarea", { id: "edit-justification", maxlength: "2000",
      required: perm.justification_required ? true : null });
    const out = el("p", { id: "edit-result", role: "status" });
    const submit = el("button", { type: "submit", id: "edit-submit", class: "secondary" }, "Propose these arguments");
    const form = el("form", { novalidate: true },
      el("p", { class: "hint" }, "An edit does not approve anything: this request is cancelled as superseded, and a new request with your arguments waits for its own decision (where separation of duties applies, by another reviewer)."),
      el("div", { class: "field" }, el("label", { for: "edit-args" }, "Arguments (a JSON object)"), args,
        el("p", { class: "hint", id: "edit-args-hint" }, "Checked here and again by the server.")),
      el("div", { class: "field" }, el("label", { for: "edit-justification" },
        "Why" + (perm.justification_required ? " (required under " + profile + ")" : " (optional)")), why),
      submit, out);
    form.addEventListener("submit", async (ev) => {
      ev.preventDefault();
      const text = args.value;
      let value;
      try { value = JSON.parse(text); } catch (e) {
        out.className = "error"; out.textContent = visible("Not valid JSON: " + e.message); args.focus(); return;
      }
      if (value === null || typeof value !== "object" || Array.isArray(value)) {
        out.className = "error"; out.textContent = "The arguments must be a JSON object."; args.focus(); return;
      }
      if (stable(value) === stable(req.action.arguments)) {
        out.className = "error"; out.textContent = "Nothing changed: approve the request instead."; args.focus(); return;
      }
      if (why.required && !why.value.trim()) {
        out.className = "error"; out.textContent = "Write why first."; why.focus(); return;
      }
      submit.disabled = true;
      // The text is sent as typed, so numbers keep their exact literals.
      const body = new RawJSON('{"arguments":' + text + ',"justification":' + JSON.stringify(why.value.trim()) + "}");
      const r = await api("POST", "/approvals/" + encodeURIComponent(req.id) + "/edits", body);
      if (r.status === 201 && r.data && r.data.created && r.data.created.request) {
        const nr = r.data.created.request;
        state.pending.set(nr.id, nr);
        if (r.data.cancelled && r.data.cancelled.resolution) {
          state.resolved.set(req.id, r.data.cancelled.resolution);
          state.pending.delete(req.id);
        }
        announce("Edit proposed as request " + nr.id + "; it needs its own decision.");
        openRequest(nr.id);
      } else {
        out.className = "error";
        out.textContent = visible(problemText(r));
        submit.disabled = false;
      }
    });
    box.append(form);
    return box;
  }

  // stable is a JSON text of v with object members sorted, to compare two
  // values.
  function stable(v) {
    if (Array.isArray(v)) return "[" + v.map(stable).join(",") + "]";
    if (v && typeof v === "object") {
      return "{" + Object.keys(v).sort().map((k) => JSON.stringify(k) + ":" + stable(v[k])).join(",") + "}";
    }
    return JSON.stringify(v);
  }

  async function decide(req, choice, just, result, choices) {
    const text = just.value.trim();
    if (choice.decision === "approve" && just.required && !text) {
      result.className = "error";
      result.textContent = "Write a justification first.";
      just.focus();
      return;
    }
    for (const b of choices.querySelectorAll("button")) b.disabled = true;
    const r = await postDecision(req, choice, text);
    if (r.ok && r.data && r.data.type === "approval.activity") {
      // A vote towards a quorum: recorded, the request is still pending.
      state.drafts.delete(req.id);
      result.className = "notice good";
      result.textContent = visible("Your vote is recorded. " + r.data.activity.message);
      announce("Vote recorded");
      return;
    }
    if (r.ok && r.data && r.data.resolution) {
      const res = r.data.resolution;
      state.drafts.delete(req.id);
      state.resolved.set(req.id, res);
      result.className = "notice " + (res.outcome === "approved" ? "good" : "bad");
      result.textContent = visible("Outcome: " + res.outcome + ". " + res.message);
      announce("Decision recorded: " + res.outcome);
    } else {
      result.className = "error";
      result.textContent = visible(r.data && r.data.resolution ? "Outcome: " + r.data.resolution.outcome + ". " + r.data.resolution.message : problemText(r));
      for (const b of choices.querySelectorAll("button")) b.disabled = false;
    }
  }

  // ---- history and rules ----
  // loadHistory shows the first page of the history search (the latest
  // resolutions when there is none); more appends the next page.
  async function loadHistory(more) {
    const q = new URLSearchParams(state.search);
    if (!q.has("limit")) q.set("limit", "50");
    if (more) q.set("cursor", state.next);
    const r = await api("GET", "/approvals/history?" + q.toString());
    if (!r.ok) {
      $("history-error").textContent = visible(problemText(r));
      return;
    }
    $("history-error").textContent = "";
    const rows = r.data.resolved || [];
    state.next = r.data.next_cursor || "";
    $("history-more").hidden = !state.next;
    const tb = $("history-body");
    if (!more) clear(tb);
    const total = tb.children.length + rows.length;
    $("history-empty").textContent = state.search ? "No resolution matches this search." : "No request has been resolved yet.";
    $("history-empty").hidden = total > 0;
    $("history-table").hidden = total === 0;
    for (const h of rows) {
      const who = h.actor ? (h.actor.display_name || h.actor.id) + (h.actor.authenticated_by ? " (" + h.actor.authenticated_by + ")" : "")
        : (h.rule_id ? "remembered rule" : "—");
      tb.append(el("tr", { "data-request": h.request_id },
        el("td", {}, el("div", { class: "mono" }, h.action_name || h.request_id), el("div", { class: "muted" }, h.summary || ""),
          h.justification ? el("div", { class: "muted" }, "Justification: " + h.justification) : null,
          h.question ? el("div", { class: "muted" }, "Asked: " + h.question) : null,
          h.response ? el("div", { class: "muted", "data-response": h.request_id }, "Reply: " + h.response) : null,
          h.because && h.because.length ? el("details", { class: "because" }, el("summary", {}, "Matched because…"),
            el("ul", {}, ...h.because.map((b) => el("li", {}, b)))) : null),
        el("td", { class: "outcome-" + (h.superseded_by ? "superseded" : h.outcome) },
          h.superseded_by ? "superseded" : h.outcome + (h.effective_scope ? " (" + h.effective_scope + ")" : ""),
          h.superseded_by ? el("div", { class: "muted" }, "by ",
            el("a", { href: "#/request/" + encodeURIComponent(h.superseded_by) }, h.superseded_by)) : null),
        el("td", {}, who),
        el("td", { class: "execution", "data-execution": h.request_id }, h.outcome === "approved" ? "…" : "—"),
        el("td", {}, fmtTime(h.resolved_at))));
    }
    const checks = rows.filter((h) => h.outcome === "approved").map((h) => executionOf(h.request_id).then((x) => {
      const cell = tb.querySelector('[data-execution="' + CSS.escape(h.request_id) + '"]');
      if (cell) cell.textContent = visible(x ? x.text : "—");
      return x;
    }));
    // An approved call runs after the decision: look again until it has.
    const xs = await Promise.all(checks);
    if (xs.some((x) => x && !x.final) && !state.historyAgain) {
      state.historyAgain = setTimeout(() => { state.historyAgain = null; if (!state.search) loadHistory(); }, 1500);
    }
  }

  // The search form: since and until are local times, sent as RFC 3339.
  $("history-search").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const q = new URLSearchParams();
    for (const f of ["agent", "capability", "reviewer", "profile", "outcome", "risk"]) {
      const v = $("hs-" + f).value.trim();
      if (v) q.set(f, v);
    }
    for (const f of ["since", "until"]) {
      const v = $("hs-" + f).value;
      if (!v) continue;
      const d = new Date(v);
      if (isNaN(d)) { $("history-error").textContent = f + ": not a date and time."; return; }
      q.set(f, d.toISOString());
    }
    if ($("hs-limit").value !== "50") q.set("limit", $("hs-limit").value);
    state.search = q.toString();
    loadHistory();
  });
  $("history-search").addEventListener("reset", () => { state.search = ""; setTimeout(() => loadHistory(), 0); });
  $("history-more").addEventListener("click", () => loadHistory(true));

  async function loadRules() {
    const r = await api("GET", "/approvals/rules");
    if (!r.ok) return;
    const rules = (r.data.rules || []).filter((x) => x.active);
    const list = $("rules-list");
    clear(list);
    $("rules-empty").hidden = rules.length > 0;
    for (const { rule } of rules) {
      const cons = constraintWords(rule.constraints || rule.scope_constraints);
      const btn = el("button", { type: "button", class: "secondary", "data-rule": rule.id,
        onclick: async () => {
          if (!confirm("Revoke this rule? Matching requests will ask again.")) return;
          btn.disabled = true;
          const x = await api("POST", "/approvals/rules/" + encodeURIComponent(rule.id) + "/revoke");
          if (!x.ok) { btn.disabled = false; announce(problemText(x)); return; }
          announce("Rule revoked.");
          loadRules();
        } }, "Revoke");
      list.append(el("li", { class: "rule" },
        el("div", {},
          el("div", { class: "item-title" }, rule.scope + " rule: " + (cons.join("; ") || rule.id)),
          el("div", { class: "item-meta" },
            el("span", {}, "approved by " + ((rule.actor && rule.actor.id) || "?")),
            el("span", {}, "since " + fmtTime(rule.created_at)),
            rule.expires_at ? el("span", {}, "until " + fmtTime(rule.expires_at)) : null)),
        btn));
    }
  }

  // ---- reviews after execution (the gateway's /v1/reviews; absent
  // without a gateway, and then the pane stays hidden) ----
  async function loadReviews() {
    const r = await api("GET", "/v1/reviews?state=open").catch(() => null);
    if (!r || !r.ok) return;
    $("reviews-pane").hidden = false;
    const reviews = r.data.reviews || [];
    const list = $("reviews-list");
    clear(list);
    $("reviews-empty").hidden = reviews.length > 0;
    for (const v of reviews) {
      const why = el("input", { type: "text", class: "review-why", "aria-label": "Finding for " + v.capability, placeholder: "What you found (optional)" });
      const result = el("div", { role: "status" });
      const verdict = (what) => async () => {
        for (const b of item.querySelectorAll("button")) b.disabled = true;
        const x = await api("POST", "/v1/reviews/" + encodeURIComponent(v.exchange_id), { verdict: what, justification: why.value.trim() });
        if (!x.ok) {
          result.className = "error";
          result.textContent = visible(problemText(x));
          for (const b of item.querySelectorAll("button")) b.disabled = false;
          return;
        }
        announce("Review recorded: " + what);
        loadReviews();
      };
      // The server says whether this reviewer may give a verdict (roles,
      // separation of duties); it refuses one anyway when not.
      if (v.may_review === false) {
        result.className = "muted";
        result.textContent = visible(v.refusal || "You may not review this call.");
      }
      const item = el("li", { class: "rule" + (v.overdue ? " overdue" : "") },
        el("div", {},
          el("div", { class: "item-title mono" }, v.capability),
          el("div", { class: "item-meta" },
            el("span", {}, "from " + v.sender),
            v.profile ? el("span", {}, v.profile) : null,
            el("span", {}, "ran: " + v.outcome),
            el("span", { class: v.overdue ? "overdue-text" : "" }, (v.overdue ? "overdue since " : "due ") + fmtTime(v.due_at))),
          why, result),
        el("div", { class: "choices-inline" },
          el("button", { type: "button", onclick: verdict("accepted"), disabled: v.may_review === false ? "" : null }, "Accept"),
          el("button", { type: "button", class: "secondary", onclick: verdict("flagged"), disabled: v.may_review === false ? "" : null }, "Flag")));
      list.append(item);
    }
  }

  // ---- boot ----
  setInterval(tick, 1000);
  (async function boot() {
    const r = await api("GET", "/approvals/me").catch(() => null);
    if (r && r.ok) {
      state.me = r.data;
      start();
    } else {
      showLogin("");
    }
  })();
})();
