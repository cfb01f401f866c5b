// The toolfleet inspector: plain JavaScript, no library, no build step (see the Go
// package's doc). Everything shown is built with textContent, never from HTML strings.
'use strict';
(() => {
  const TOKEN_KEY = 'toolfleet.token';
  const main = document.getElementById('main');
  let token = sessionStorage.getItem(TOKEN_KEY) || '';
  let cleanup = []; // what the current page stops when another is shown

  // ---- DOM ------------------------------------------------------------------
  // h('tag.class', {attr: v, onclick: f}, ...children): children are nodes or text.
  function h(spec, attrs, ...kids) {
    const [tag, ...classes] = spec.split('.');
    const el = document.createElement(tag || 'div');
    if (classes.length) el.className = classes.join(' ');
    if (attrs) {
      for (const [k, v] of Object.entries(attrs)) {
        if (v === undefined || v === null || v === false) continue;
        if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
        else if (k === 'text') el.textContent = v;
        else if (k === 'style') el.style.cssText = v; // CSSOM: the CSP forbids style attributes
        else if (k in el && k !== 'list' && typeof v !== 'string') el[k] = v;
        else el.setAttribute(k, v === true ? '' : String(v));
      }
    }
    for (const kid of kids.flat(Infinity)) {
      if (kid === undefined || kid === null || kid === false) continue;
      el.append(kid instanceof Node ? kid : document.createTextNode(String(kid)));
    }
    return el;
  }
  const replace = (el, ...kids) => { el.replaceChildren(...kids.flat(Infinity).filter(k => k !== null && k !== undefined && k !== false)); return el; };

  function toast(msg, bad) {
    const t = h('div' + (bad ? '.bad' : ''), {text: msg});
    document.getElementById('toast').append(t);
    setTimeout(() => t.remove(), bad ? 8000 : 3500);
  }

  // ---- formatting -------------------------------------------------------------
  const pad = n => String(n).padStart(2, '0');
  function fmtTime(iso) {
    if (!iso) return '';
    const d = new Date(iso), now = new Date();
    const t = `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
    return d.toDateString() === now.toDateString() ? t : `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${t}`;
  }
  function fmtMs(ms) {
    if (ms === undefined || ms === null || isNaN(ms)) return '';
    if (ms < 1000) return `${Math.round(ms)} ms`;
    if (ms < 60000) return `${(ms / 1000).toFixed(ms < 10000 ? 2 : 1)} s`;
    const m = Math.floor(ms / 60000), s = Math.round((ms % 60000) / 1000);
    return m < 60 ? `${m}m ${s}s` : `${Math.floor(m / 60)}h ${m % 60}m`;
  }
  const fmtCost = c => c ? '$' + (c < 0.01 ? c.toPrecision(2) : c.toFixed(4)) : '';
  const ms = iso => iso ? Date.parse(iso) : NaN;
  function pretty(raw) {
    if (raw === undefined || raw === null) return '';
    if (typeof raw === 'string') {
      try { return JSON.stringify(JSON.parse(raw), null, 2); } catch { return raw; }
    }
    return JSON.stringify(raw, null, 2);
  }
  const status = (s, title) => h('span.status.' + String(s || '').replace(/[^a-z_]/g, ''), {text: s || '—', title});
  const runLink = id => h('a.mono', {href: '#/runs/' + encodeURIComponent(id), text: id});

  // A JSON value shown pretty-printed; one larger than 4 KiB opens on demand.
  function jsonBlock(value, label) {
    const text = pretty(value);
    if (text.length <= 4096) return h('pre', {'aria-label': label, text});
    const box = h('div');
    const open = h('button', {type: 'button', text: `Show ${label} (${(text.length / 1024).toFixed(1)} KiB)`,
      onclick: () => replace(box, h('pre', {'aria-label': label, text}))});
    return replace(box, h('pre', {text: text.slice(0, 600) + '\n…'}), open);
  }

  // ---- the API ------------------------------------------------------------------
  class APIError extends Error {
    constructor(status, body, fallback) {
      const e = body && body.error;
      super((e && e.message) || fallback);
      this.status = status; this.violations = (e && e.violations) || []; this.body = body;
    }
  }
  function headers(extra) {
    const hd = Object.assign({}, extra);
    if (token) hd.Authorization = 'Bearer ' + token;
    return hd;
  }
  async function api(path, opts = {}) {
    const init = {method: opts.method || 'GET', headers: headers()};
    if (opts.body !== undefined) {
      init.headers['Content-Type'] = 'application/json';
      init.body = JSON.stringify(opts.body);
    }
    const res = await fetch(path, init);
    const text = await res.text();
    let body = null;
    try { body = text ? JSON.parse(text) : null; } catch { body = null; }
    if (!res.ok) {
      if (res.status === 401) askToken('The API wants a token: ' + ((body && body.error && body.error.message) || 'unauthorized'));
      throw new APIError(res.status, body, `${res.status} ${res.statusText}`);
    }
    return body;
  }
  const q = params => {
    const u = new URLSearchParams();
    for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null && v !== '') u.set(k, v);
    const s = u.toString();
    return s ? '?' + s : '';
  };

  // errorBox shows an API error: its message and, for invalid arguments, each
  // violation with its JSON pointer.
  function errorBox(err) {
    const v = err.violations || [];
    return h('div.error-box', {role: 'alert'},
      h('strong', {text: err.status ? `${err.status}: ` : ''}), err.message || String(err),
      v.length ? h('ul', {}, v.map(x => h('li', {}, h('code', {text: x.pointer || '/'}), ' ', x.message))) : null);
  }

  // ---- Server-Sent Events over fetch ----------------------------------------------
  // EventSource cannot send Authorization; fetch can, so the token never goes into a
  // URL. The stream resumes after the last event id it saw when it drops.
  const liveEl = document.getElementById('live');
  let liveStreams = 0;
  function setLive(delta) {
    liveStreams += delta;
    liveEl.textContent = liveStreams > 0 ? '● live' : '○ offline';
    liveEl.classList.toggle('on', liveStreams > 0);
  }
  function follow(path, onEvent, onEnd) {
    const ctl = new AbortController();
    let lastId = '', backoff = 500, stopped = false;
    (async () => {
      while (!stopped) {
        let connected = false;
        try {
          const res = await fetch(path, {headers: headers(Object.assign({Accept: 'text/event-stream'},
            lastId ? {'Last-Event-ID': lastId} : {})), signal: ctl.signal, cache: 'no-store'});
          if (res.status === 204) { stopped = true; break; } // the run is done and was seen
          if (res.status === 401) { askToken('The API wants a token.'); break; }
          if (!res.ok) { if (res.status === 404 || res.status === 403) { stopped = true; break; } throw new Error(res.statusText); }
          connected = true; setLive(1); backoff = 500;
          const reader = res.body.getReader(), dec = new TextDecoder();
          let buf = '', ev = {event: 'message', data: [], id: ''};
          for (;;) {
            const {value, done} = await reader.read();
            if (done) break;
            buf += dec.decode(value, {stream: true});
            let nl;
            while ((nl = buf.indexOf('\n')) >= 0) {
              let line = buf.slice(0, nl); buf = buf.slice(nl + 1);
              if (line.endsWith('\r')) line = line.slice(0, -1);
              if (line === '') {
                if (ev.data.length) {
                  if (ev.id) lastId = ev.id;
                  let data = ev.data.join('\n');
                  try { data = JSON.parse(data); } catch { /* keep the text */ }
                  try { onEvent(ev.event, data, ev.id); } catch (e) { console.error(e); }
                }
                ev = {event: 'message', data: [], id: ''};
                continue;
              }
              if (line.startsWith(':')) continue;
              const i = line.indexOf(':');
              const field = i < 0 ? line : line.slice(0, i);
              const val = i < 0 ? '' : line.slice(i + 1).replace(/^ /, '');
              if (field === 'data') ev.data.push(val);
              else if (field === 'event') ev.event = val;
              else if (field === 'id') ev.id = val;
            }
          }
        } catch (e) {
          if (ctl.signal.aborted) break;
        } finally {
          if (connected) setLive(-1);
        }
        if (stopped || ctl.signal.aborted) break;
        await new Promise(r => setTimeout(r, backoff));
        backoff = Math.min(backoff * 2, 15000);
      }
      if (onEnd && !ctl.signal.aborted) onEnd();
    })();
    return () => { stopped = true; ctl.abort(); };
  }

  // coalesce runs fn at most once per `every` ms however often it is asked for, and
  // once more after a run that was asked for again while it ran.
  function coalesce(fn, every) {
    let timer = null, running = false, again = false, last = 0;
    const fire = async () => {
      timer = null;
      if (running) { again = true; return; }
      running = true; last = Date.now();
      try { await fn(); } catch (e) { console.error(e); }
      running = false;
      if (again) { again = false; ask(); }
    };
    const ask = () => {
      if (timer) return;
      timer = setTimeout(fire, Math.max(0, last + every - Date.now()));
    };
    ask.cancel = () => { clearTimeout(timer); timer = null; again = false; };
    return ask;
  }

  // One stream of the tenant's events for the whole page; pages subscribe to it.
  const tenantListeners = new Set();
  let stopTenantStream = null;
  function tenantStream() {
    if (!stopTenantStream) {
      stopTenantStream = follow('/v1/events', (what, data) => tenantListeners.forEach(l => l(what, data)));
    }
  }
  function onTenantEvents(fn) {
    tenantListeners.add(fn);
    tenantStream();
    return () => tenantListeners.delete(fn);
  }

  // ---- the pending-approvals badge ---------------------------------------------------
  // The badge is the API's list of pending approvals, counted: the approvals page sets it
  // from the list it shows, so the two never disagree. The list follows the runs'
  // records a moment after their events, so an event asks for the count again once
  // that moment has passed too.
  const badge = document.getElementById('pending-count');
  function setBadge(n, more) {
    badge.hidden = n === 0;
    badge.textContent = more ? `${n}+` : String(n);
    badge.setAttribute('aria-label', `${badge.textContent} pending`);
  }
  const refreshBadge = coalesce(async () => {
    try {
      const r = await api('/v1/approvals?status=pending&limit=500');
      setBadge((r.approvals || []).length, !!r.next);
    } catch { badge.hidden = true; }
  }, 250);
  let badgeSettle = null;
  function askBadge() {
    refreshBadge();
    clearTimeout(badgeSettle);
    badgeSettle = setTimeout(refreshBadge, 1000);
  }
  const badgeEvents = new Set(['approval_needed', 'approval_answered', 'done', 'tool_result', 'tool_error', 'paused', 'resumed']);

  // ---- the token page -------------------------------------------------------------
  let asking = false;
  function askToken(why) {
    if (asking) return;
    asking = true;
    stopPage();
    if (stopTenantStream) { stopTenantStream(); stopTenantStream = null; }
    const input = h('input', {type: 'password', id: 'token', autocomplete: 'off', required: true, 'aria-describedby': 'token-help'});
    replace(main, h('form.card.login', {onsubmit: e => {
      e.preventDefault();
      token = input.value.trim();
      sessionStorage.setItem(TOKEN_KEY, token);
      asking = false;
      start();
    }},
    h('h1', {text: 'Sign in with an API token'}),
    h('p.muted', {id: 'token-help', text: (why ? why + ' ' : '') +
      'Paste one of the planner API\'s bearer tokens. It stays in this tab (sessionStorage) and goes only to this server, as Authorization: Bearer.'}),
    h('label', {for: 'token'}, 'Token', input),
    h('p', {}, h('button.primary', {type: 'submit', text: 'Use token'}))));
    input.focus();
  }
  document.getElementById('signout').addEventListener('click', () => {
    sessionStorage.removeItem(TOKEN_KEY); token = ''; askToken('Token forgotten.');
  });

  // ---- routing ----------------------------------------------------------------------
  function stopPage() { cleanup.forEach(f => f()); cleanup = []; }
  function route() {
    if (asking) return;
    const hash = location.hash.replace(/^#/, '') || '/runs';
    const [path, query] = hash.split('?');
    const params = new URLSearchParams(query || '');
    const parts = path.split('/').filter(Boolean).map(decodeURIComponent);
    stopPage();
    document.getElementById('signout').hidden = !token;
    const page = parts[0] || 'runs';
    document.querySelectorAll('[data-nav]').forEach(a => { if (a.dataset.nav === page) a.setAttribute('aria-current', 'page'); else a.removeAttribute('aria-current'); });
    if (page === 'runs' && parts[1]) return runPage(parts[1], params);
    if (page === 'approvals') return approvalsPage(params);
    if (page === 'fleet') return fleetPage();
    if (page === 'compare') return comparePage(params); // fork and compare, below
    return runsPage(params);
  }
  // The badge listens for as long as the page is open: not in cleanup, which each view
  // change runs (the view's own listeners).
  let badgeListening = false;
  function start() {
    if (!badgeListening) { badgeListening = true; tenantListeners.add(what => { if (badgeEvents.has(what)) askBadge(); }); }
    tenantStream(); // again after a new token (askToken stops it)
    refreshBadge();
    route();
  }
  window.addEventListener('hashchange', () => { route(); main.focus({preventScroll: true}); });

  // ---- runs ---------------------------------------------------------------------------
  const TERMINATIONS = ['completed', 'final_tool', 'max_steps', 'timeout', 'token_budget', 'cost_budget', 'error_threshold',
    'loop_detected', 'model_error', 'stop_condition', 'stop_hook', 'tool_required', 'storage_error', 'canceled'];
  const FILTERS = ['status', 'termination', 'outcome', 'tool', 'since', 'until', 'parent', 'q'];
  // A done run's outcome: clean, or it ended with failed calls, or with calls refused.
  const OUTCOMES = ['clean', 'tool_errors', 'denied'];
  const toLocalInput = iso => { if (!iso) return ''; const d = new Date(iso); return isNaN(d) ? '' : `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:${pad(d.getMinutes())}`; };

  // runStatus is a run's status as a badge: a done run's termination, colored by its
  // outcome when the API gives one (green when clean, red with failed calls, magenta
  // with refused ones), so that a run that "completed" over failures does not look
  // like a clean one.
  function runStatus(r) {
    if (r.status !== 'done') return status(r.status, r.detail);
    const outcome = OUTCOMES.includes(r.outcome) ? r.outcome : '';
    // The termination's class stays (what it ended with); the outcome's colors it.
    return h('span.status.' + String(r.termination || 'done').replace(/[^a-z_]/g, '') + (outcome ? '.outcome-' + outcome : ''),
      {text: r.termination || 'done', title: [outcome, r.detail].filter(Boolean).join(': '), 'data-outcome': outcome || null});
  }
  // runStatusNotes is what a status alone does not say: the calls that wait for a person
  // and when they are denied, who paused the run and why, a done run's failed and
  // refused calls.
  function runStatusNotes(r) {
    const notes = [];
    if (r.pendingApprovals) notes.push(h('span.status.awaiting_approval', {text: `${r.pendingApprovals} to approve`}));
    if (r.approvalDeadline && r.status === 'awaiting_approval') {
      notes.push(h('span.muted', {'data-fact': 'deadline', title: r.approvalDeadline, text: `denied at ${fmtTime(r.approvalDeadline)} unanswered`}));
    }
    if (r.status === 'paused' && (r.pausedBy || r.pauseReason)) {
      notes.push(h('span.muted', {'data-fact': 'paused', title: r.pausedAt || '', text: `by ${r.pausedBy || '?'}${r.pauseReason ? ': ' + r.pauseReason : ''}`}));
    }
    const n = (k, one, many) => k ? `${k} ${k === 1 ? one : many}` : '';
    const bad = [n(r.toolErrors, 'tool error', 'tool errors'), n(r.denials, 'denied', 'denied')].filter(Boolean).join(' · ');
    if (bad) notes.push(h('span.outcome-count', {'data-fact': 'outcome', text: bad}));
    return notes.map(x => h('div', {}, x));
  }

  function runsPage(params) {
    const f = Object.fromEntries(FILTERS.map(k => [k, params.get(k) || '']));
    const field = (name, label, el) => { el.name = name; el.id = 'f-' + name; return h('label', {for: el.id}, label, el); };
    const select = (name, opts) => { const s = h('select', {}, h('option', {value: '', text: 'any'}), opts.map(o => h('option', {value: o, text: o}))); s.value = f[name]; return s; };
    const text = (name, attrs) => h('input', Object.assign({value: f[name]}, attrs));
    const form = h('form.filters', {role: 'search', onsubmit: e => {
      e.preventDefault();
      const p = {};
      for (const k of FILTERS) {
        let v = form.elements[k].value.trim();
        if ((k === 'since' || k === 'until') && v) v = new Date(v).toISOString();
        p[k] = v;
      }
      location.hash = '#/runs' + q(p);
    }},
    field('q', 'Input contains', text('q', {type: 'search', placeholder: 'text'})),
    field('status', 'Status', select('status', ['running', 'awaiting_approval', 'paused', 'done'])),
    field('termination', 'Termination', select('termination', TERMINATIONS)),
    field('outcome', 'Outcome', select('outcome', OUTCOMES)),
    field('tool', 'Tool', text('tool', {list: 'tool-names', size: 12})),
    field('since', 'Since', h('input', {type: 'datetime-local', value: toLocalInput(f.since)})),
    field('until', 'Until', h('input', {type: 'datetime-local', value: toLocalInput(f.until)})),
    field('parent', 'Parent run', text('parent', {size: 12})),
    h('button.primary', {type: 'submit', text: 'Filter'}),
    h('a', {href: '#/runs', text: 'Clear'}),
    h('datalist', {id: 'tool-names'}));
    const body = h('tbody');
    const more = h('button', {type: 'button', text: 'Load more', hidden: true});
    const info = h('p.muted', {role: 'status'});
    const picker = comparePicker();
    replace(main, h('h1', {text: 'Runs'}), form, info, picker.bar,
      h('div.table-wrap', {}, h('table', {'aria-label': 'Runs'},
        h('thead', {}, h('tr', {}, ['Run', 'Status', 'Input', 'Tools', 'Calls', 'Steps', 'Tokens', 'Cost', 'Took', 'Created', 'Finished'].map((c, i) =>
          h('th' + (i >= 4 && i <= 8 ? '.num' : '') + (i === 3 || i === 7 || i === 10 ? '.hide-narrow' : ''), {scope: 'col', text: c})))), body)),
      h('p', {}, more));
    api('/v1/tools').then(r => replace(form.querySelector('datalist'), (r.tools || []).map(t => h('option', {value: t.name})))).catch(() => {});

    let rows = [], next = '', known = new Set();
    const filterQuery = extra => q(Object.assign({}, f, extra));
    const render = () => {
      replace(body, rows.map(r => {
        const tr = h('tr' + (known.size && !known.has(r.id + r.status) ? '.fresh' : ''), {'data-run': r.id},
          h('td', {}, runLink(r.id), r.parentId ? h('div.muted', {}, '↳ ', runLink(r.parentId)) : null),
          h('td', {}, runStatus(r), runStatusNotes(r)),
          h('td.input', {title: r.input || '', text: r.input || ''}),
          h('td.hide-narrow.mono', {text: (r.tools || []).join(', ')}),
          h('td.num', {text: r.calls ?? ''}), h('td.num', {text: r.steps ?? ''}),
          h('td.num', {text: r.tokens ?? ''}), h('td.num.hide-narrow', {text: fmtCost(r.cost)}),
          h('td.num', {'data-fact': 'took', text: fmtMs(r.durationMs)}),
          h('td', {title: r.createdAt, text: fmtTime(r.createdAt)}),
          h('td.hide-narrow', {'data-fact': 'finished', title: r.finishedAt || '', text: fmtTime(r.finishedAt)}));
        return tr;
      }));
      known = new Set(rows.map(r => r.id + r.status));
      picker.sync(body);
      more.hidden = !next;
      info.textContent = rows.length ? `${rows.length} run${rows.length === 1 ? '' : 's'}${next ? ' (more below)' : ''}` : 'No runs match.';
    };
    const load = async (append) => {
      try {
        const limit = append ? 50 : Math.min(500, Math.max(50, rows.length));
        const r = await api('/v1/runs' + filterQuery({limit, cursor: append ? next : ''}));
        rows = append ? rows.concat(r.runs || []) : (r.runs || []);
        next = r.next || '';
        render();
      } catch (e) {
        replace(info, errorBox(e));
      }
    };
    more.addEventListener('click', () => load(true));
    const refresh = coalesce(() => load(false), 1000);
    const listen = new Set(['started', 'done', 'model_answered', 'approval_needed', 'approval_answered', 'tool_result', 'tool_error', 'paused', 'resumed']);
    cleanup.push(onTenantEvents(what => { if (listen.has(what)) refresh(); }), refresh.cancel);
    load(false);
  }

  // ---- one run ---------------------------------------------------------------------
  function runPage(id, params) {
    const sections = {};
    for (const s of ['head', 'actions', 'forks', 'conversation', 'timeline', 'steps', 'tools', 'calls', 'nested']) sections[s] = h('section', {'aria-label': s});
    replace(main, h('h1', {}, 'Run ', h('span.mono', {text: id})), sections.head, sections.actions, sections.forks,
      h('h2', {text: 'Timeline'}), sections.timeline,
      h('h2', {text: 'Calls'}), sections.calls,
      h('h2', {text: 'Conversation'}), sections.conversation,
      h('h2', {text: 'Steps: model, tokens, cost, the tools offered'}), sections.steps,
      h('h2', {text: 'By tool'}), sections.tools,
      sections.nested);
    const st = {run: null, messages: [], stepUsage: new Map(), callNodes: new Map(), focus: params.get('call'), actionsBuilt: false, catalog: null};
    const load = async () => {
      let run;
      try { run = await api('/v1/runs/' + encodeURIComponent(id)); } catch (e) { replace(sections.head, errorBox(e)); return; }
      const stepChanged = !st.run || st.run.steps !== run.steps || st.run.status !== run.status || st.run.turn !== run.turn;
      st.run = run;
      if (stepChanged) {
        try { st.messages = await api('/v1/runs/' + encodeURIComponent(id) + '/messages') || []; } catch { /* shown by the run */ }
        renderConversation(sections.conversation, st.messages, run);
      }
      renderHead(sections.head, run);
      renderActions(sections.actions, st, refresh);
      renderForks(sections.forks, st);
      renderTimeline(sections.timeline, run, st);
      renderSteps(sections.steps, run, st);
      renderByTool(sections.tools, run);
      renderCalls(sections.calls, run, st, refresh);
      if (stepChanged && run.calls.some(c => c.name === 'run_agent')) renderNested(sections.nested, run);
      if (st.focus) {
        const node = st.callNodes.get(st.focus);
        if (node) { node.el.open = true; node.el.classList.add('target'); node.el.scrollIntoView({block: 'center'}); }
        st.focus = null;
      }
    };
    const refresh = coalesce(load, 300);
    // The run's own events, replayed from its start: they carry each step's usage and
    // cost, and tell when to fetch the run again.
    cleanup.push(follow('/v1/runs/' + encodeURIComponent(id) + '/events', (what, data) => {
      if (what === 'model_answered' && data && data.detail) st.stepUsage.set(data.step, data.detail);
      if (what !== 'text_delta') refresh();
    }, () => refresh()), refresh.cancel);
    load();
  }

  function fact(label, value) { return value === '' || value === undefined || value === null ? null : h('div', {}, h('dt', {text: label}), h('dd', {}, value)); }

  // running: the run goes on, or waits for a person to go on (awaiting_approval).
  const running = run => run.status === 'running' || run.status === 'awaiting_approval';
  // runNow is the run's present: now while it runs, the moment it paused while it is
  // paused (its clock stops), its end once it ended.
  const runNow = run => run.finishedAt ? ms(run.finishedAt) : run.status === 'paused' && run.paused ? ms(run.paused.at) : Date.now();
  // pauseText says why a paused run paused and who paused it.
  function pauseText(p) {
    const why = p.reason === 'after_tool' ? `after a step that called ${p.tool || 'a tool'}` :
      p.reason === 'after_step' ? 'after its step, as it pauses after every step' : `asked by ${p.by || '?'}${p.why ? ': ' + p.why : ''}`;
    return `before step ${p.step}, ${why}, at ${fmtTime(p.at)}`;
  }

  function renderHead(el, run) {
    const paused = run.status === 'paused' && run.paused;
    const dur = run.finishedAt ? run.durationMs : runNow(run) - ms(run.createdAt);
    const meta = Object.entries(run.metadata || {}).sort(([a], [b]) => a < b ? -1 : 1);
    replace(el, h('div.card', {},
      h('dl.facts', {},
        fact('Status', h('span', {}, runStatus(run), run.detail ? h('div.muted', {text: run.detail}) : null)),
        run.status === 'awaiting_approval' && run.approvalDeadline ? fact('Waiting for', h('span', {'data-fact': 'deadline', title: run.approvalDeadline},
          `an approval: unanswered, its calls are denied at ${fmtTime(run.approvalDeadline)}`)) : null,
        paused ? fact('Paused', h('span', {'data-fact': 'paused', text: pauseText(run.paused)})) : null,
        run.pauseRequested ? fact('Pause requested', h('span', {'data-fact': 'pause-requested',
          text: `by ${run.pauseRequested.by || '?'}${run.pauseRequested.reason ? ': ' + run.pauseRequested.reason : ''}, for the next step boundary`})) : null,
        fact('Model', run.model), fact('Tenant / role', [run.tenant || '(anonymous)', run.role].filter(Boolean).join(' / ')),
        fact('Created', h('span', {title: run.createdAt, text: fmtTime(run.createdAt)})),
        fact(run.finishedAt ? 'Took' : paused ? 'Ran for, before the pause' : 'Running for', h('span', {'data-fact': 'duration', text: fmtMs(dur)})),
        fact('Steps', String(run.steps)), fact('Calls', String(run.calls.length)),
        fact('Tokens', String(run.tokens)), fact('Cost', fmtCost(run.cost) || '$0'),
        run.treeTokens !== run.tokens || run.treeCost !== run.cost ? fact('With nested runs', `${run.treeSteps} steps, ${run.treeTokens} tokens, ${fmtCost(run.treeCost) || '$0'}`) : null,
        run.parentId ? fact('Parent run', runLink(run.parentId)) : null,
        run.turn ? fact('Turn', String(run.turn)) : null,
        run.canceled ? fact('Canceled', `by ${run.canceled.by || '?'}${run.canceled.reason ? ': ' + run.canceled.reason : ''}`) : null,
        meta.length ? fact('Metadata', h('span.meta', {'data-fact': 'metadata'}, meta.map(([k, v]) => h('code.badge', {text: `${k}=${v}`})))) : null),
      run.termination ? h('p', {}, h('strong', {text: 'Termination: '}), run.termination, run.detail ? ' — ' + run.detail : '') : null,
      run.answer ? h('div', {}, h('strong', {text: 'Answer'}), h('div.text', {style: 'white-space:pre-wrap', text: run.answer})) : null,
      (run.warnings || []).length ? h('ul', {}, run.warnings.map(w => h('li.muted', {text: w}))) : null));
  }

  // Actions the caller may take on the run; the API says no (403, 409) when the caller
  // may not, and that is shown.
  function renderActions(el, st, refresh) {
    const run = st.run;
    if (!st.actionsBuilt) {
      st.actionsBuilt = true;
      const out = h('div', {'aria-live': 'polite'});
      // Two presses cancel: the first asks (for 5 s), the second cancels.
      let armed = null;
      const cancel = h('button.danger', {type: 'button', id: 'cancel-run', text: 'Cancel run', onclick: async () => {
        if (!armed) {
          cancel.textContent = 'Press again to cancel the run and its calls';
          armed = setTimeout(() => { armed = null; cancel.textContent = 'Cancel run'; }, 5000);
          return;
        }
        clearTimeout(armed); armed = null; cancel.textContent = 'Cancel run';
        cancel.disabled = true;
        try { await api(`/v1/runs/${encodeURIComponent(run.id)}/cancel`, {method: 'POST', body: {reason: 'canceled from the inspector'}}); toast('Run canceled'); replace(out); }
        catch (e) { replace(out, errorBox(e)); }
        refresh();
      }});
      const msg = h('textarea', {id: 'follow-up', rows: 2, style: 'min-height:3em', placeholder: 'A follow-up message for the model'});
      const send = h('form', {onsubmit: async e => {
        e.preventDefault();
        if (!msg.value.trim()) return;
        try { await api(`/v1/runs/${encodeURIComponent(run.id)}/messages`, {method: 'POST', body: {input: msg.value}}); msg.value = ''; toast('Message sent'); replace(out); }
        catch (e2) { replace(out, errorBox(e2)); }
        refresh();
      }}, h('label', {for: 'follow-up'}, 'Follow-up message', msg), h('p.row', {}, h('button.primary', {type: 'submit', text: 'Send'})));
      // Pause: the run stops at its next step boundary (its current step's calls finish).
      const pauseReason = h('input', {type: 'text', id: 'pause-reason', placeholder: 'why (optional)', 'aria-label': 'Why pause', size: 20});
      const pause = h('button', {type: 'button', id: 'pause-run', text: 'Pause at the next step', onclick: async () => {
        pause.disabled = true;
        const why = pauseReason.value.trim();
        try {
          await api(`/v1/runs/${encodeURIComponent(run.id)}/pause`, {method: 'POST', body: why ? {reason: why} : {}});
          toast('The run pauses at its next step boundary'); pauseReason.value = ''; replace(out);
        } catch (e) { replace(out, errorBox(e)); }
        refresh();
      }});
      const resumeBox = h('div.card', {id: 'resume', hidden: true});
      const toolsBox = h('div.row', {'aria-label': 'Tools for the next steps'});
      const details = h('details.card', {open: run.status !== 'done'}, h('summary', {text: 'Actions: cancel, pause, resume, follow up, tools'}),
        h('div', {style: 'margin-top:8px'}, h('p.row', {}, cancel, pause, pauseReason), resumeBox, send,
          h('div', {}, h('strong', {text: 'Tools for the next steps '}), h('span.muted', {text: '(uncheck to disable)'})), toolsBox, out));
      st.actionEls = {cancel, pause, resumeBox, details, toolsBox, out};
      replace(el, details);
      api('/v1/tools').then(r => { st.catalog = (r.tools || []).map(t => t.name); renderActions(el, st, refresh); }).catch(() => {});
    }
    const {cancel, pause, resumeBox, details, toolsBox, out} = st.actionEls;
    cancel.disabled = run.status === 'done';
    // A nested run pauses with its parent; a run pauses once.
    pause.disabled = !running(run) || !!run.pauseRequested || !!run.parentId;
    pause.title = run.parentId ? 'A nested run pauses with the run that started it.' : '';
    const pausedAt = run.status === 'paused' && run.paused ? run.paused.at : '';
    resumeBox.hidden = !pausedAt;
    if (pausedAt && st.resumeFor !== pausedAt) { details.open = true; resumeForm(resumeBox, run, refresh); }
    st.resumeFor = pausedAt;
    const names = [...new Set([...(run.tools || st.catalog || []), ...(run.disabled || [])])].sort();
    const disabled = new Set(run.disabled || []);
    replace(toolsBox, names.map(name => {
      const box = h('input', {type: 'checkbox', checked: !disabled.has(name), 'data-tool': name, onchange: async () => {
        const body = box.checked ? {enable: [name]} : {disable: [name]};
        try { await api(`/v1/runs/${encodeURIComponent(run.id)}/tools`, {method: 'POST', body}); toast(`${name} ${box.checked ? 'enabled' : 'disabled'}`); replace(out); }
        catch (e) { box.checked = !box.checked; replace(out, errorBox(e)); }
        refresh();
      }});
      return h('label.check', {}, box, name);
    }));
  }

  // resumeForm resumes the paused run, with the edits the API takes: messages of the
  // conversation as its model will be asked it dropped (by their index) or compacted
  // into a summary, a message added, new limits, no more pauses. An edit the API
  // refuses (one that leaves a call without its result) shows its message.
  function resumeForm(box, run, refresh) {
    const out = h('div', {'aria-live': 'polite'});
    const list = h('ol.resume-msgs', {start: 0, 'aria-label': 'The conversation as the model will be asked it'}, h('li.muted', {text: 'Loading…'}));
    const num = (id, label, attrs) => { const el = h('input', Object.assign({type: 'number', id, min: 0, style: 'width:6em'}, attrs)); return [el, h('label', {for: id}, label, el)]; };
    const [from, fromLabel] = num('compact-from', 'Compact from');
    const [to, toLabel] = num('compact-to', 'to (not included)');
    const summary = h('input', {type: 'text', id: 'compact-summary', size: 28, placeholder: 'what those messages said'});
    const input = h('textarea', {id: 'resume-input', rows: 2, style: 'min-height:3em', placeholder: 'A message for the model (optional)'});
    const [maxSteps, maxStepsLabel] = num('resume-max-steps', 'Max steps', {min: 1});
    const timeout = h('input', {type: 'text', id: 'resume-timeout', size: 8, placeholder: 'e.g. 5m'});
    const stopPausing = h('input', {type: 'checkbox', id: 'resume-stop-pausing'});
    const go = h('button.primary', {type: 'submit', id: 'resume-run', text: 'Resume'});
    const form = h('form', {onsubmit: async e => {
      e.preventDefault();
      const body = {};
      const drop = [...list.querySelectorAll('input[data-drop]:checked')].map(x => Number(x.dataset.drop));
      if (drop.length) body.drop = drop;
      if (from.value !== '' || to.value !== '' || summary.value.trim()) body.compact = {from: Number(from.value), to: Number(to.value), summary: summary.value.trim()};
      if (input.value.trim()) body.input = input.value.trim();
      const limits = {};
      if (maxSteps.value) limits.maxSteps = Number(maxSteps.value);
      if (timeout.value.trim()) limits.timeout = timeout.value.trim();
      if (Object.keys(limits).length) body.limits = limits;
      if (stopPausing.checked) body.pause = {};
      go.disabled = true;
      try { await api(`/v1/runs/${encodeURIComponent(run.id)}/resume`, {method: 'POST', body}); toast('Run resumed'); replace(out); }
      catch (e2) { replace(out, errorBox(e2)); }
      go.disabled = false;
      refresh();
    }},
    h('p.muted', {text: 'The conversation as the model will be asked it; tick the messages to drop (a call and its result go together).'}), list,
    h('div.row', {}, fromLabel, toLabel, h('label', {for: 'compact-summary'}, 'Summary replacing them', summary)),
    h('label', {for: 'resume-input'}, 'Add a message', input),
    h('div.row', {}, maxStepsLabel, h('label', {for: 'resume-timeout'}, 'Timeout', timeout), h('label.check', {}, stopPausing, 'pause no more')),
    h('p.row', {}, go), out);
    replace(box, h('strong', {text: 'Resume, with edits'}), form);
    api(`/v1/runs/${encodeURIComponent(run.id)}/messages?view=model`).then(msgs => replace(list, (msgs || []).map((m, i) => h('li', {'data-index': i},
      h('label.check', {}, h('input', {type: 'checkbox', 'data-drop': i, 'aria-label': `Drop message ${i}`}), 'drop'),
      h('span.mono', {text: String(i)}), h('span', {text: m.role}), h('span.content', {text: compact(messageLine(m))})))))
      .catch(e => replace(list, h('li', {}, errorBox(e))));
  }
  // messageLine is a message in one line: its text, its calls (→) and results (←).
  const messageLine = m => [m.text || '', ...(m.toolCalls || []).map(tc => `→ ${tc.name} ${compact(tc.arguments)}`),
    ...(m.toolResults || []).map(tr => `← ${tr.name} ${compact(tr.content)}`)].filter(Boolean).join(' · ');

  function renderConversation(el, messages, run) {
    if (!messages.length) { replace(el, h('p.muted', {text: 'No messages yet.'})); return; }
    const calls = new Map(run.calls.map(c => [c.modelCallId + '@' + c.step, c]));
    let step = -1;
    replace(el, h('div.card.conversation', {}, messages.map(m => {
      if (m.role === 'assistant') step++;
      return h('div.msg.' + m.role, {},
        h('div.role', {text: m.role}),
        m.text ? h('div.text', {text: m.text}) : null,
        (m.toolCalls || []).map(tc => {
          const c = calls.get(tc.id + '@' + step);
          return h('div', {}, '→ ', c ? h('a.mono', {href: `#/runs/${encodeURIComponent(run.id)}?call=${encodeURIComponent(c.id)}`, text: tc.name}) : h('span.mono', {text: tc.name}),
            h('code', {text: ' ' + compact(tc.arguments)}));
        }),
        (m.toolResults || []).map(tr => h('div', {}, '← ', h('span.mono', {text: tr.name + ': '}), h('code', {text: compact(tr.content)}))));
    })));
  }
  function compact(v) {
    let s = typeof v === 'string' ? v : JSON.stringify(v);
    try { if (typeof v === 'string') s = JSON.stringify(JSON.parse(v)); } catch { /* as is */ }
    return s && s.length > 300 ? s.slice(0, 300) + '…' : (s || '');
  }

  // The waterfall: per step the model's time, per call its time in the queue, waiting
  // for limits, parked for approval, and each attempt running (failed ones red).
  function callSegments(c, now) {
    const segs = [];
    const called = ms(c.calledAt);
    const end = c.finishedAt ? ms(c.finishedAt) : now;
    const parkedAt = ms(c.approvalRequestedAt);
    const answered = c.approval ? ms(c.approval.at) : (c.status === 'awaiting_approval' ? now : NaN);
    const started = ms(c.startedAt);
    const limitFrom = !isNaN(started) && c.limitWaitMs ? started - c.limitWaitMs : NaN;
    if (c.local) return [{cls: 'run', from: called, to: end, what: 'answered by the planner'}];
    let t = called;
    if (!isNaN(parkedAt)) {
      segs.push({cls: 'queue', from: t, to: parkedAt, what: 'queued'});
      segs.push({cls: 'park', from: parkedAt, to: isNaN(answered) ? end : answered, what: 'parked for approval'});
      t = isNaN(answered) ? end : answered;
    }
    const runFrom = isNaN(started) ? NaN : started;
    if (!isNaN(limitFrom)) {
      segs.push({cls: 'queue', from: t, to: limitFrom, what: 'queued'});
      segs.push({cls: 'limit', from: limitFrom, to: started, what: 'waiting for the tool\'s limits'});
    } else if (!isNaN(runFrom)) {
      segs.push({cls: 'queue', from: t, to: runFrom, what: 'queued'});
    } else if (!c.finishedAt || isNaN(parkedAt)) {
      segs.push({cls: 'queue', from: t, to: end, what: c.finishedAt ? 'queued (never ran)' : 'queued'});
    }
    if (c.attemptSpans && c.attemptSpans.length) {
      c.attemptSpans.forEach((a, i) => segs.push({cls: a.code ? 'run fail' : 'run', from: ms(a.started_at), to: ms(a.finished_at),
        what: `attempt ${i + 1}${a.code ? ' failed: ' + a.code : ''}`}));
    } else if (!isNaN(runFrom)) {
      segs.push({cls: 'run' + (c.finishedAt ? '' : ' open') + (c.status !== 'ok' && c.finishedAt ? ' fail' : ''), from: runFrom, to: end,
        what: c.finishedAt ? `ran (${c.status})` : 'running'});
    }
    return segs.filter(s => !isNaN(s.from) && !isNaN(s.to) && s.to >= s.from);
  }
  // timeScale maps the run's time t0..t1 onto the track (0..100%), collapsing each long
  // stretch in which nothing but a wait for a person (or a pause, or nothing) happened,
  // so that a four-minute approval does not squash every other bar to a hairline. A
  // stretch is long when it outlasts both 2 s and half of the run's busy time; each
  // collapsed one takes a few percent of the track and is marked with its length.
  function timeScale(t0, t1, busy) {
    const span = Math.max(1, t1 - t0);
    const iv = busy.map(([a, b]) => [Math.max(t0, a), Math.min(t1, b)]).filter(([a, b]) => b >= a).sort((x, y) => x[0] - y[0]);
    const merged = [];
    for (const [a, b] of iv) {
      const last = merged[merged.length - 1];
      if (last && a <= last[1]) last[1] = Math.max(last[1], b); else merged.push([a, b]);
    }
    const idle = [];
    let at = t0;
    for (const [a, b] of merged) { if (a > at) idle.push([at, a]); at = Math.max(at, b); }
    if (t1 > at) idle.push([at, t1]);
    const idleTotal = idle.reduce((n, [a, b]) => n + b - a, 0);
    const long = idle.filter(([a, b]) => b - a >= Math.max(2000, (span - idleTotal) / 2));
    const linear = span - long.reduce((n, [a, b]) => n + b - a, 0);
    if (!long.length || linear <= 0) return {pos: t => (t - t0) / span * 100, gaps: [], span};
    const each = Math.min(6, 40 / long.length); // the track share of one collapsed stretch
    const k = (100 - each * long.length) / linear;
    const pos = t => {
      let x = 0, from = t0;
      for (const [a, b] of long) {
        if (t <= a) break;
        x += (a - from) * k;
        if (t < b) return x + (t - a) / (b - a) * each;
        x += each; from = b;
      }
      return x + (Math.min(t, t1) - from) * k;
    };
    return {pos, gaps: long.map(([a, b]) => ({from: pos(a), to: pos(b), ms: b - a})), span};
  }
  function renderTimeline(el, run, st) {
    const now = runNow(run); // a paused run's clock stopped when it paused
    const t0 = ms(run.createdAt);
    let t1 = now;
    for (const c of run.calls) t1 = Math.max(t1, c.finishedAt ? ms(c.finishedAt) : now);
    const byStep = new Map();
    for (const c of run.calls) { if (!byStep.has(c.step)) byStep.set(c.step, []); byStep.get(c.step).push(c); }
    const offered = new Map((run.offered || []).map(o => [o.step, o]));
    const steps = [...new Set([...byStep.keys(), ...offered.keys()])].sort((a, b) => a - b);
    // The model's time per step, and each call's segments, before any is drawn: the scale
    // is made from all of them.
    const model = new Map();
    for (const s of steps) {
      const o = offered.get(s);
      if (!o || !o.askedAt) continue;
      // modelMs is absent while the model thinks, and when it took under a millisecond.
      const thinking = o.modelMs === undefined && running(run) && s === Math.max(...steps) && !byStep.has(s);
      const from = ms(o.askedAt);
      model.set(s, {cls: 'model', from, to: thinking ? now : from + (o.modelMs || 0), what: `step ${s}: the model`});
    }
    const segsOf = new Map(run.calls.map(c => [c.id, callSegments(c, now)]));
    const all = [...model.values(), ...[...segsOf.values()].flat()];
    const scale = timeScale(t0, t1, all.filter(x => x.cls !== 'park').map(x => [x.from, x.to]));
    const pos = (from, to) => {
      const a = scale.pos(from), b = scale.pos(to);
      return `left:${a.toFixed(3)}%;width:${Math.max(0, b - a).toFixed(3)}%`;
    };
    const gapMarks = () => scale.gaps.map(g => h('span.gap', {style: `left:${g.from.toFixed(3)}%;width:${(g.to - g.from).toFixed(3)}%`,
      title: `${fmtMs(g.ms)} with nothing but waits, collapsed`}));
    const bars = segs => segs.map(x => h('span.bar.' + x.cls.replace(/ /g, '.'), {style: pos(x.from, x.to), title: `${x.what}: ${fmtMs(x.to - x.from)}`}));
    const rows = [];
    for (const s of steps) {
      const m = model.get(s);
      if (m) {
        rows.push(h('div.wf-row.step', {}, h('div.wf-label', {title: `step ${s}: the model took ${fmtMs(m.to - m.from)}`}, `step ${s} · model ${fmtMs(m.to - m.from)}`),
          h('div.wf-track', {}, gapMarks(), bars([m]))));
      } else {
        rows.push(h('div.wf-row.step', {}, h('div.wf-label', {text: `step ${s}`}), h('div.wf-track', {}, gapMarks())));
      }
      for (const c of byStep.get(s) || []) {
        // The call's own time, and its wait for a person apart: a 4-minute approval is not
        // a slow tool.
        const took = callMs(c, now), parked = parkedMs(c, now);
        const total = `${fmtMs(took)}${parked ? ` + ${fmtMs(parked)} approval wait` : ''}`;
        const segs = segsOf.get(c.id);
        rows.push(h('div.wf-row', {'data-call': c.id},
          h('div.wf-label', {title: `${c.name} ${c.status} ${total}`},
            h('a', {href: `#/runs/${encodeURIComponent(run.id)}?call=${encodeURIComponent(c.id)}`, text: c.name}), ' ',
            h('span.muted', {text: `${c.status} ${total}${c.attempts > 1 ? ` ×${c.attempts}` : ''}`})),
          h('div.wf-track', {role: 'img', 'aria-label': segs.map(x => `${x.what} ${fmtMs(x.to - x.from)}`).join(', ')}, gapMarks(), bars(segs))));
      }
    }
    replace(el,
      h('div.legend', {'aria-hidden': 'true'}, [['model', 'model'], ['queue', 'queued'], ['limit', 'limits'], ['park', 'parked for approval'], ['run', 'running'], ['fail', 'failed attempt']]
        .map(([c, t]) => h('span', {}, h('i.bar.' + c, {style: 'position:static;display:inline-block'}), t)),
        scale.gaps.length ? h('span', {}, h('i.gap-key', {text: '⋯'}), ' a long wait, collapsed') : null),
      h('div.wf', {}, h('div.wf-row.axis', {'aria-hidden': 'true'}, h('div.wf-label'),
        h('div.wf-axis', {}, h('span', {text: '0', style: 'left:0'}),
          // a label near the end is aligned on it, so that it stays on the page
          scale.gaps.map(g => (g.from + g.to) / 2 > 85 ? h('span.gap-label.at-end', {style: 'right:0', text: `+${fmtMs(g.ms)}`, title: 'a long wait, collapsed'}) :
            h('span.gap-label', {style: `left:${((g.from + g.to) / 2).toFixed(3)}%`, text: `+${fmtMs(g.ms)}`, title: 'a long wait, collapsed'})),
          h('span.end', {text: fmtMs(scale.span)}))),
        rows.length ? rows : h('p.muted', {style: 'padding:0 8px', text: 'No steps yet.'})));
  }

  function renderSteps(el, run, st) {
    const offered = run.offered || [];
    if (!offered.length) { replace(el, h('p.muted', {text: 'No steps yet.'})); return; }
    replace(el, h('div.table-wrap', {}, h('table', {'aria-label': 'Steps'},
      h('thead', {}, h('tr', {}, ['Step', 'Model', 'Tokens', 'Cost', 'Offered tools (picker: score, matched terms)'].map((c, i) => h('th' + (i && i < 4 ? '.num' : ''), {scope: 'col', text: c})))),
      h('tbody', {}, offered.map(o => {
        const u = st.stepUsage.get(o.step) || {};
        const usage = u.usage || {};
        const tokens = u.tokens ?? ((usage.inputTokens || 0) + (usage.outputTokens || 0) || '');
        return h('tr', {},
          h('td.num', {text: o.step}), h('td.num', {text: o.askedAt ? fmtMs(o.modelMs || 0) : ''}),
          h('td.num', {text: usage.inputTokens !== undefined ? `${usage.inputTokens} in / ${usage.outputTokens} out` : tokens}),
          h('td.num', {text: fmtCost(u.cost)}),
          h('td', {}, o.picked && o.picked.length ? h('ul.picked', {}, o.picked.map(p => h('li', {},
            h('span.mono', {text: p.name}), ` ${Number(p.score).toFixed(3)}`, p.reason ? h('span.muted', {text: ' — ' + p.reason}) : null,
            p.provenance ? h('span.muted', {text: ` (${p.provenance.scorer}${p.provenance.fallback ? ', fallback' : ''})`}) : null)))
            : h('span.mono', {text: (o.tools || []).join(', ') || '(none)'})));
      })))));
  }

  function renderByTool(el, run) {
    const by = new Map();
    for (const c of run.calls) {
      const t = by.get(c.name) || {calls: 0, errors: 0, ms: 0, attempts: 0};
      t.calls++; if (c.finishedAt && c.status !== 'ok') t.errors++;
      t.ms += c.finishedAt ? callMs(c) : 0; t.attempts += c.attempts || 0;
      if (c.nested) { t.tokens = (t.tokens || 0) + (c.nested.tokens || 0); t.cost = (t.cost || 0) + (c.nested.cost || 0); }
      by.set(c.name, t);
    }
    if (!by.size) { replace(el, h('p.muted', {text: 'No calls yet.'})); return; }
    replace(el, h('div.table-wrap', {}, h('table', {'aria-label': 'By tool'},
      h('thead', {}, h('tr', {}, ['Tool', 'Calls', 'Errors', 'Attempts', 'Time', 'Nested tokens', 'Nested cost'].map((c, i) => h('th' + (i ? '.num' : ''), {scope: 'col', text: c})))),
      h('tbody', {}, [...by].sort().map(([name, t]) => h('tr', {}, h('td.mono', {text: name}), h('td.num', {text: t.calls}), h('td.num', {text: t.errors}),
        h('td.num', {text: t.attempts}), h('td.num', {text: fmtMs(t.ms)}), h('td.num', {text: t.tokens ?? ''}), h('td.num', {text: fmtCost(t.cost)})))))));
  }

  // The calls, one details element each, kept across refreshes (open ones stay open,
  // an argument being edited stays as it is) and rebuilt only when the call changed.
  function renderCalls(el, run, st, refresh) {
    if (!run.calls.length) { replace(el, h('p.muted', {text: 'No calls yet.'})); st.callNodes.clear(); return; }
    const wanted = [];
    for (const c of run.calls) {
      const key = JSON.stringify(c);
      let node = st.callNodes.get(c.id);
      if (!node) {
        // A call that waits for an approval opens with its answer form.
        const d = h('details.call', {'data-call': c.id, id: 'call-' + c.id, open: c.status === 'awaiting_approval' || subWaits(c)});
        node = {el: d, key: ''};
        d.addEventListener('toggle', () => { if (d.open && !node.built) { node.built = true; fillCall(node, run.id, refresh); } });
        st.callNodes.set(c.id, node);
      }
      if (node.key !== key) {
        node.key = key; node.call = c;
        const editing = node.el.querySelector('textarea.args-editor');
        replace(node.el, h('summary', {},
          h('span.mono', {text: `#${c.step}`}), h('strong.mono', {text: c.name}), status(c.status),
          c.status === 'awaiting_approval' ? h('span', {text: 'needs your approval'}) : null,
          subWaits(c) ? h('span', {text: 'a sub-call needs your approval'}) : null,
          h('span.muted', {text: [c.finishedAt ? fmtMs(callMs(c)) : '', c.approvalRequestedAt && c.approval ? `waited ${fmtMs(parkedMs(c))} for approval` : '',
            c.attempts > 1 ? `${c.attempts} attempts` : '', c.executor || ''].filter(Boolean).join(' · ')})));
        node.built = false;
        if (node.el.open && !(editing && c.status === 'awaiting_approval')) { node.built = true; fillCall(node, run.id, refresh); }
        else if (node.el.open) { node.built = true; node.el.append(node.body); }
      }
      wanted.push(node.el);
    }
    const ids = new Set(run.calls.map(c => c.id));
    for (const k of st.callNodes.keys()) if (!ids.has(k)) st.callNodes.delete(k);
    if (el.children.length !== wanted.length || wanted.some((w, i) => el.children[i] !== w)) replace(el, wanted);
  }

  function fillCall(node, runID, refresh) {
    const c = node.call;
    const body = h('div.body');
    node.body = body;
    const facts = h('dl.facts', {},
      fact('Call id', h('span.mono', {text: c.id})), fact('Model call id', h('span.mono', {text: c.modelCallId})),
      fact('Called', h('span', {title: c.calledAt, text: fmtTime(c.calledAt)})),
      c.startedAt ? fact('Queued', fmtMs(ms(c.startedAt) - ms(c.calledAt) - (c.limitWaitMs || 0) - parkedMs(c))) : null,
      c.approvalRequestedAt ? fact('Parked for approval', fmtMs(parkedMs(c))) : null,
      c.limitWaitMs ? fact('Waited for limits', fmtMs(c.limitWaitMs)) : null,
      c.startedAt && c.finishedAt ? fact('Ran', fmtMs(ms(c.finishedAt) - ms(c.startedAt))) : null,
      c.finishedAt ? fact(c.approvalRequestedAt ? 'Took, the approval wait left out' : 'Took', h('span', {'data-fact': 'took', text: fmtMs(callMs(c))})) : null,
      fact('Attempts', c.attempts ? String(c.attempts) : ''), fact('Executor', c.executor ? h('span.mono', {text: c.executor}) : ''),
      fact('Validated', c.validated ? 'yes' : `no${c.noSchemaMode ? ' (' + c.noSchemaMode + ')' : ''}`),
      c.local ? fact('Answered by', 'the planner') : null);
    body.append(facts);
    if (c.attemptSpans && c.attemptSpans.length) {
      body.append(h('h3', {text: 'Attempts'}), h('ol', {}, c.attemptSpans.map(a => h('li', {},
        `${fmtTime(a.started_at)} for ${fmtMs(ms(a.finished_at) - ms(a.started_at))}`, a.code ? h('span', {}, ' — ', status('error'), ' ', a.code) : ' — ok'))));
    }
    if (c.argumentsOriginal) body.append(h('h3', {text: 'Arguments the model sent'}), jsonBlock(c.argumentsOriginal, 'original arguments'));
    body.append(h('h3', {text: c.argumentsOriginal ? 'Arguments that ran' : 'Arguments'}),
      c.argumentsRef ? h('p.muted', {text: `Stored by reference (${c.argumentsRef.size} bytes, ${c.argumentsRef.id}).`}) : jsonBlock(c.arguments, 'arguments'));
    if (c.status === 'awaiting_approval') body.append(approvalForm({callId: c.id, runId: runID, tool: c.name, arguments: c.arguments}, refresh));
    if (c.error) {
      body.append(h('h3', {text: 'Error'}), errorBox({message: `${c.error.code}: ${c.error.message}`, violations: c.error.violations}));
    }
    if (c.output !== undefined && (!c.error || pretty(c.output) !== JSON.stringify(c.error))) body.append(h('h3', {text: 'Output'}), jsonBlock(c.output, 'output'));
    if (c.approval) {
      const a = c.approval;
      body.append(h('h3', {text: 'Approval'}), h('p', {}, status(a.decision), ` by ${a.by || '?'} at ${fmtTime(a.at)}`, a.reason ? ` — ${a.reason}` : ''));
    }
    if ((c.policy || []).length) {
      body.append(h('h3', {text: 'Policy'}), h('ul', {}, c.policy.map(p => h('li', {}, h('code', {text: JSON.stringify(p)})))));
    }
    if ((c.subs || []).length) {
      // A composite's sub-calls, each checked like a call; one that waits is answered here.
      body.append(h('h3', {text: 'Sub-calls'}), h('ol.subs', {}, c.subs.map(s => h('li', {'data-call': s.id},
        h('span.mono', {text: s.id.slice(c.id.length + 1)}), ' ', h('strong.mono', {text: s.name}), ' ', status(s.status),
        s.approval ? ` ${s.approval.decision} by ${s.approval.by || '?'}` : '',
        (s.policy || []).map(p => h('code', {text: ' ' + JSON.stringify(p)})),
        s.status === 'awaiting_approval' ? approvalForm({callId: s.id, runId: runID, tool: s.name, arguments: subArgs(c, s.id)}, refresh) : null))));
    }
    if (c.name === 'run_agent') {
      const child = childRunID(c);
      body.append(h('h3', {text: 'Nested run'}), h('p', {}, runLink(child)), nestedRun(child));
    }
    node.el.append(body);
  }
  const subWaits = c => (c.subs || []).some(s => s.status === 'awaiting_approval');
  // subArgs are the arguments of the sub-call id within those of its composite call c.
  const subArgs = (c, id) => {
    let args = c.arguments;
    for (const n of id.slice(c.id.length).split('-sub-').slice(1)) args = (((args || {}).calls || [])[n - 1] || {}).args;
    return args;
  };
  // parkedMs is the call's time parked for an approval: the record's approvalWaitMs
  // once answered when the API gives it, else from when it was asked to its answer (or
  // now, while it waits).
  // now is the instant the page is drawn for (the same for every figure of a call).
  const parkedMs = (c, now) => c.approvalWaitMs !== undefined && (c.approval || c.finishedAt) ? c.approvalWaitMs :
    c.approvalRequestedAt ? ((c.approval ? ms(c.approval.at) : (now ?? Date.now())) - ms(c.approvalRequestedAt)) : 0;
  // callMs is the call's time without its wait for an approval: the record's durationMs
  // once the API leaves the wait out of it (approvalWaitMs given), else the total less it.
  const callMs = (c, now) => c.approvalWaitMs !== undefined && c.finishedAt && c.durationMs !== undefined ? c.durationMs :
    Math.max(0, (c.finishedAt ? ms(c.finishedAt) : (now ?? Date.now())) - ms(c.calledAt) - parkedMs(c, now));
  function childRunID(c) {
    try { const o = typeof c.output === 'string' ? JSON.parse(c.output) : c.output; if (o && o.runId) return o.runId; } catch { /* derive it */ }
    return 'c' + c.id.replace(/-/g, '_'); // the planner's childID
  }
  // nestedRun shows a nested run inline: its outcome and its calls, each linking to it.
  function nestedRun(id) {
    const box = h('div.nested', {}, h('p.muted', {text: 'Loading…'}));
    api('/v1/runs/' + encodeURIComponent(id)).then(r => replace(box,
      h('p', {}, status(r.status === 'done' ? r.termination : r.status), ` ${r.steps} steps, ${r.calls.length} calls, ${r.tokens} tokens`),
      r.answer ? h('p', {text: r.answer}) : null,
      h('ul', {}, r.calls.map(c => h('li', {}, h('a.mono', {href: `#/runs/${encodeURIComponent(r.id)}?call=${encodeURIComponent(c.id)}`, text: c.name}), ' ', status(c.status),
        c.name === 'run_agent' ? nestedRun(childRunID(c)) : null)))))
      .catch(e => replace(box, errorBox(e)));
    return box;
  }
  function renderNested(el, run) {
    replace(el, h('h2', {text: 'Nested runs'}), h('div', {}, run.calls.filter(c => c.name === 'run_agent').map(c =>
      h('div.card', {}, h('strong', {}, 'Step ', String(c.step), ': '), runLink(childRunID(c)), nestedRun(childRunID(c))))));
  }

  // ---- approving ------------------------------------------------------------------------
  // approvalForm answers one parked call: approve, deny (with a reason), or approve
  // with modified arguments, edited as JSON with the difference shown; the API checks
  // them against the tool's schema and its violations are shown as they come.
  function approvalForm(item, refresh) {
    const original = pretty(item.arguments || {});
    const out = h('div', {'aria-live': 'polite'});
    const reason = h('input', {type: 'text', placeholder: 'reason (optional)', 'aria-label': 'Reason', size: 24, class: 'approval-reason'});
    const editor = h('textarea.args-editor', {'aria-label': `Arguments for ${item.tool}`, spellcheck: 'false'});
    editor.value = original;
    const diff = h('div.diff', {'aria-label': 'Changes'});
    const editBox = h('div', {hidden: true}, h('label', {}, 'Arguments (JSON)', editor), h('div', {}, h('strong', {text: 'Changes'})), diff,
      h('p.row', {}, h('button.primary', {type: 'button', text: 'Approve with these arguments', 'data-action': 'approve-modified', onclick: () => {
        let args;
        try { args = JSON.parse(editor.value); } catch (e) { replace(out, errorBox({message: 'The arguments are not JSON: ' + e.message})); return; }
        answer({decision: 'approve', arguments: args});
      }})));
    const showDiff = () => {
      let now;
      try { now = JSON.stringify(JSON.parse(editor.value), null, 2); } catch (e) { replace(diff, h('span.del', {text: 'not JSON: ' + e.message})); return; }
      replace(diff, lineDiff(original.split('\n'), now.split('\n')));
    };
    editor.addEventListener('input', showDiff);
    const answer = async body => {
      if (reason.value.trim()) body.reason = reason.value.trim();
      try {
        await api('/v1/approvals/' + encodeURIComponent(item.callId), {method: 'POST', body});
        toast(`${item.tool}: ${body.decision === 'approve' ? (body.arguments ? 'approved with changes' : 'approved') : 'denied'}`);
        replace(out, h('p', {}, status(body.decision === 'approve' ? 'ok' : 'denied'), ' answered'));
        askBadge();
        refresh && refresh();
      } catch (e) { replace(out, errorBox(e)); }
    };
    return h('div.card.approval', {'data-call': item.callId},
      h('p.row', {},
        h('button.primary', {type: 'button', text: 'Approve', 'data-action': 'approve', onclick: () => answer({decision: 'approve'})}),
        h('button.danger', {type: 'button', text: 'Deny', 'data-action': 'deny', onclick: () => answer({decision: 'deny'})}),
        h('button', {type: 'button', text: 'Modify…', 'data-action': 'modify', 'aria-expanded': 'false', onclick: e => {
          editBox.hidden = !editBox.hidden; e.target.setAttribute('aria-expanded', String(!editBox.hidden)); showDiff(); if (!editBox.hidden) editor.focus();
        }}), reason),
      editBox, out);
  }
  // lineDiff: a longest-common-subsequence diff of two short line lists.
  function lineDiff(a, b) {
    if (a.length * b.length > 250000) return [h('span.del', {text: '(too large to compare)'})];
    const L = Array.from({length: a.length + 1}, () => new Uint16Array(b.length + 1));
    for (let i = a.length - 1; i >= 0; i--) for (let j = b.length - 1; j >= 0; j--) L[i][j] = a[i] === b[j] ? L[i + 1][j + 1] + 1 : Math.max(L[i + 1][j], L[i][j + 1]);
    const out = [];
    let i = 0, j = 0, changed = false;
    while (i < a.length || j < b.length) {
      if (i < a.length && j < b.length && a[i] === b[j]) { out.push(h('span', {text: '  ' + a[i] + '\n'})); i++; j++; }
      else if (j < b.length && (i >= a.length || L[i][j + 1] >= L[i + 1][j])) { out.push(h('span.add', {text: '+ ' + b[j]})); j++; changed = true; }
      else { out.push(h('span.del', {text: '- ' + a[i]})); i++; changed = true; }
    }
    return changed ? out : [h('span.muted', {text: 'no changes'})];
  }

  // ---- approvals inbox ---------------------------------------------------------------------
  // answered is how an approval ended, from the list item (answeredAt, by, claimedBy: every
  // end has them, a cancel and an expiry too) and its decision: who, when, why, and the
  // arguments the call ran with when the answer changed them.
  function answered(a) {
    const ap = a.approval || {};
    const who = a.by || ap.by || (a.status === 'expired' ? 'nobody (it expired)' : '?');
    const claimed = a.claimedBy && a.claimedBy !== who ? ` (said: ${a.claimedBy})` : '';
    const at = a.answeredAt || ap.at;
    return h('div', {'data-fact': 'answer'},
      h('p', {}, status(a.status), ` by ${who}${claimed}${at ? ' at ' + fmtTime(at) : ''}${ap.reason ? ' — ' + ap.reason : ''}`),
      ap.arguments_approved !== undefined ? [h('p.muted', {text: 'Ran with the arguments as changed:'}), jsonBlock(ap.arguments_approved, 'arguments approved')] : null);
  }

  function approvalsPage(params) {
    const which = params.get('status') || 'pending';
    const list = h('div', {'aria-live': 'polite'});
    replace(main, h('h1', {text: 'Approvals'}),
      h('p.row', {}, ['pending', 'answered', 'all'].map(s => h('a', {href: '#/approvals?status=' + s, 'aria-current': s === which ? 'page' : null,
        text: s === which ? `[${s}]` : s}))),
      list);
    const timers = [];
    const tick = setInterval(() => timers.forEach(t => t()), 1000);
    const load = async () => {
      let r;
      try { r = await api('/v1/approvals' + q({status: which, limit: 200})); } catch (e) { replace(list, errorBox(e)); return; }
      timers.length = 0;
      const items = r.approvals || [];
      if (which === 'pending') setBadge(items.length, !!r.next); else askBadge();
      if (!items.length) { replace(list, h('p.muted', {text: which === 'pending' ? 'Nothing waits for an approval.' : 'No approvals.'})); return; }
      replace(list, items.map(a => {
        const countdown = h('span.countdown');
        const update = () => {
          const left = ms(a.expiresAt) - Date.now();
          countdown.textContent = isNaN(left) ? '' : left > 0 ? `expires in ${fmtMs(left)}` : 'expired';
          countdown.classList.toggle('late', left < 60000);
        };
        if (a.status === 'pending') { update(); timers.push(update); }
        return h('article.card', {'data-call': a.callId},
          h('div.row', {}, h('strong.mono', {text: a.tool}), status(a.status === 'pending' ? 'awaiting_approval' : a.status),
            h('span', {}, 'run ', h('a.mono', {href: `#/runs/${encodeURIComponent(a.runId)}?call=${encodeURIComponent(a.callId)}`, text: a.runId})),
            a.status === 'pending' ? countdown : null),
          h('p.muted', {text: [`requested ${fmtTime(a.requestedAt)}`, a.reason, a.caller ? `by ${a.caller.tenant || '(anonymous)'}${a.caller.role ? ' / ' + a.caller.role : ''}` : '',
            a.answerableBy && (a.answerableBy.roles || []).length ? `answerable by ${a.answerableBy.roles.join(', ')}` : ''].filter(Boolean).join(' · ')}),
          a.argumentsRef ? h('p.muted', {text: `Arguments stored by reference (${a.argumentsRef.size} bytes).`}) : jsonBlock(a.arguments, 'arguments'),
          a.status === 'pending' ? approvalForm(a, refresh) : answered(a));
      }));
    };
    const refresh = coalesce(load, 500);
    const listen = new Set(['approval_needed', 'approval_answered', 'done', 'tool_result', 'tool_error']);
    cleanup.push(onTenantEvents(what => { if (listen.has(what)) refresh(); }), () => clearInterval(tick), refresh.cancel);
    load();
  }

  // ---- the fleet ---------------------------------------------------------------------------
  function fleetPage() {
    const toolsEl = h('div', {id: 'tools'}), deadEl = h('div', {id: 'dead-letters'});
    const reload = h('button', {type: 'button', text: 'Refresh'});
    replace(main, h('h1', {text: 'Fleet'}), h('p.row', {}, reload, h('span.muted', {text: 'Queues refresh as run events arrive.'})),
      h('h2', {text: 'Tools'}), toolsEl, h('h2', {text: 'Dead letters'}), deadEl);
    const loadTools = async () => {
      let r;
      try { r = await api('/v1/tools'); } catch (e) { replace(toolsEl, errorBox(e)); return; }
      replace(toolsEl, h('div.table-wrap', {}, h('table', {'aria-label': 'Tools'},
        h('thead', {}, h('tr', {}, ['Tool', 'Executors', 'Waiting', 'In flight', 'Calls (5m)', 'Errors (5m)', 'Kind'].map((c, i) => h('th' + (i && i < 6 ? '.num' : ''), {scope: 'col', text: c})))),
        h('tbody', {}, (r.tools || []).map(t => h('tr', {'data-tool': t.name},
          h('td', {}, h('strong.mono', {text: t.name}), t.description ? h('div.muted', {text: t.description.length > 120 ? t.description.slice(0, 120) + '…' : t.description}) : null),
          h('td.num', {title: (t.executorIds || []).join('\n'), text: t.executors ?? ''}),
          h('td.num', {text: t.waiting ?? ''}), h('td.num', {text: t.inFlight ?? ''}),
          h('td.num', {text: t.recent ? t.recent.calls : ''}), h('td.num', {text: t.recent ? t.recent.errors : ''}),
          h('td', {}, t.safe ? 'safe' : h('span.status.awaiting_approval', {text: 'needs approval', title: 'its calls wait for an approval'}),
            t.readOnly ? ' · read-only' : '', t.noSchemaMode ? ` · no schema (${t.noSchemaMode})` : '')))))));
    };
    const loadDead = async () => {
      let r;
      try { r = await api('/v1/dead-letters?limit=100'); } catch (e) { replace(deadEl, errorBox(e)); return; }
      const items = r.deadLetters || [];
      if (!items.length) { replace(deadEl, h('p.muted', {text: 'No dead letters.'})); return; }
      replace(deadEl, h('div.table-wrap', {}, h('table', {'aria-label': 'Dead letters'},
        h('thead', {}, h('tr', {}, ['Time', 'Tool', 'Call', 'Reason', 'Deliveries', 'Body'].map(c => h('th', {scope: 'col', text: c})))),
        h('tbody', {}, items.map(d => h('tr', {'data-seq': d.seq},
          h('td', {title: d.time, text: fmtTime(d.time)}), h('td.mono', {text: d.tool || ''}),
          h('td', {}, d.runId ? h('a.mono', {href: `#/runs/${encodeURIComponent(d.runId)}`, text: d.callId || d.runId}) : h('span.mono', {text: d.callId || ''})),
          h('td', {}, h('div', {text: d.reason || ''}), d.error ? h('div.muted', {text: d.error}) : null, h('div.muted.mono', {text: d.subject || ''})),
          h('td.num', {text: d.deliveries ?? ''}),
          h('td', {}, h('details', {}, h('summary', {text: `${d.bodySize ?? 0} bytes`}), h('pre', {text: d.body || ''})))))))));
    };
    const load = () => Promise.all([loadTools(), loadDead()]);
    reload.addEventListener('click', load);
    const refresh = coalesce(load, 2000);
    cleanup.push(onTenantEvents(() => refresh()), refresh.cancel);
    load();
  }

  // ---- fork and compare -------------------------------------------------------------
  // Rerun a run from any step (POST /v1/runs/{id}/fork) and compare two runs step by
  // step (GET /v1/runs/{a}/diff/{b}): a run page's "Rerun and compare" section, the
  // runs list's compare picker and the #/compare page.

  // renderForks shows where the run was forked from, its forks (both linked, with a
  // compare link each), and a "Rerun from here" per step, which opens the fork's edits.
  function renderForks(el, st) {
    const run = st.run;
    if (!st.forks) {
      st.forks = {origin: h('div'), list: h('div'), steps: h('div'), form: h('div', {'aria-live': 'polite'}), open: null, shownSteps: -1};
      replace(el, h('details.card.forks', {open: !!run.forkedFrom}, h('summary', {text: 'Rerun and compare: forks of this run, rerun from a step'}),
        st.forks.origin, st.forks.list, h('h3', {text: 'Rerun from a step'}),
        h('p.muted', {text: 'A rerun is a new run: the steps before the one you pick are reused as recorded (their calls do not run again); that step and the ones after it run anew, as you, with your rights.'}),
        st.forks.steps, st.forks.form));
    }
    const f = st.forks;
    const cmp = (a, b) => h('a', {href: '#/compare' + q({a, b}), text: 'compare'});
    replace(f.origin, run.forkedFrom ? h('p.fork-origin', {}, 'Forked from ', runLink(run.forkedFrom.run), ` at step ${run.forkedFrom.step} · `,
      cmp(run.forkedFrom.run, run.id)) : null);
    if (f.shownSteps !== run.steps) {
      f.shownSteps = run.steps;
      const steps = [];
      for (let k = 0; k < run.steps; k++) steps.push(k);
      replace(f.steps, steps.length ? h('ol.fork-steps', {start: 0}, steps.map(k => {
        const calls = run.calls.filter(c => c.step === k);
        return h('li', {}, h('span.mono', {text: `step ${k}`}), ' ',
          h('span.muted', {text: calls.length ? calls.map(c => c.name).join(', ') : 'answer'}), ' ',
          h('button', {type: 'button', 'data-rerun-step': String(k), text: 'Rerun from here', onclick: () => openForkForm(f.form, st.run, k)}));
      })) : h('p.muted', {text: 'No steps yet.'}));
    }
    if (Date.now() - (f.listedAt || 0) < 2000) return; // a running run is loaded again often
    f.listedAt = Date.now();
    api('/v1/runs' + q({forkedFrom: run.id, limit: 50})).then(r => {
      const forks = (r && r.runs) || [];
      replace(f.list, forks.length ? h('div', {}, h('strong', {text: `Forks (${forks.length})`}), h('ul.fork-list', {}, forks.map(x =>
        h('li', {'data-fork': x.id}, runLink(x.id), ` from step ${x.forkedFrom ? x.forkedFrom.step : '?'} · `,
          status(x.status === 'done' ? x.termination : x.status), ' · ', cmp(run.id, x.id))))) : null);
    }).catch(() => replace(f.list));
  }

  // openForkForm shows the edits of a fork from step k: the conversation the model was
  // asked at that step (each message may be replaced or dropped), a message to add, the
  // model, tools and step limit; it says what is reused and what runs again.
  async function openForkForm(el, run, k) {
    replace(el, h('p.muted', {text: `Loading the conversation of step ${k}…`}));
    let msgs;
    try { msgs = await api(`/v1/runs/${encodeURIComponent(run.id)}/messages?view=model&step=${k}`) || []; }
    catch (e) { replace(el, errorBox(e)); return; }
    const reused = run.calls.filter(c => c.step < k);
    const edits = msgs.map((m, i) => {
      const drop = h('input', {type: 'checkbox', 'data-drop': String(i)});
      const editable = (m.role === 'user' || m.role === 'assistant') && !(m.toolCalls || []).length && !(m.toolResults || []).length;
      const text = editable ? h('textarea', {rows: 2, 'data-replace': String(i)}) : null;
      if (text) text.value = m.text || ''; // a textarea's text is its value, not an attribute
      return {m, i, drop, text, row: h('li.fork-msg', {}, h('span.mono', {text: `${i} ${m.role}`}), ' ',
        text || h('code', {text: m.text || compact((m.toolCalls || []).map(c => c.name + ' ' + compact(c.arguments)).concat((m.toolResults || []).map(r => '← ' + r.name)).join('; '))}),
        h('label.check', {}, drop, 'drop'))};
    });
    const input = h('textarea', {id: 'fork-input', rows: 2, placeholder: 'A message added after the conversation (optional)'});
    const model = h('input', {id: 'fork-model', placeholder: run.model, size: 16});
    const tools = h('input', {id: 'fork-tools', placeholder: (run.tools || []).join(',') || 'the run\'s', size: 30});
    const maxSteps = h('input', {id: 'fork-max-steps', type: 'number', min: 1, size: 5});
    const out = h('div', {'aria-live': 'polite'});
    const form = h('form.card.fork-form', {'data-step': String(k), onsubmit: async e => {
      e.preventDefault();
      const body = {fromStep: k};
      const replaceList = edits.filter(x => x.text && x.text.value !== (x.m.text || '') && !x.drop.checked)
        .map(x => ({index: x.i, message: {role: x.m.role, text: x.text.value}}));
      const drop = edits.filter(x => x.drop.checked).map(x => x.i);
      if (replaceList.length) body.replace = replaceList;
      if (drop.length) body.drop = drop;
      if (input.value.trim()) body.input = input.value;
      if (model.value.trim()) body.model = model.value.trim();
      if (tools.value.trim()) body.tools = tools.value.split(',').map(t => t.trim()).filter(Boolean);
      if (maxSteps.value) body.limits = {maxSteps: Number(maxSteps.value)};
      try {
        const fork = await api(`/v1/runs/${encodeURIComponent(run.id)}/fork`, {method: 'POST', body});
        toast(`Forked: run ${fork.id}`);
        location.hash = '#/runs/' + encodeURIComponent(fork.id);
      } catch (e2) { replace(out, errorBox(e2)); }
    }},
    h('h3', {text: `Rerun from step ${k}`}),
    h('p.fork-reuse', {}, k === 0 ? 'Nothing is reused: the run starts over from its input. ' :
      `Reused as recorded, not run again: steps 0–${k - 1}, ${reused.length} call${reused.length === 1 ? '' : 's'}` +
      (reused.length ? ` (${[...new Set(reused.map(c => c.name))].join(', ')})` : '') + '. ',
    h('strong', {text: `Runs again: step ${k} and after.`})),
    h('p.muted', {text: 'The conversation the model was asked at this step: edit or drop messages (a call and its result go together).'}),
    h('ol.fork-msgs', {start: 0}, edits.map(x => x.row)),
    h('label', {for: 'fork-input'}, 'Add a message', input),
    h('p.row', {}, h('label', {for: 'fork-model'}, 'Model ', model), h('label', {for: 'fork-tools'}, 'Tools ', tools),
      h('label', {for: 'fork-max-steps'}, 'Max steps ', maxSteps)),
    h('p.row', {}, h('button.primary', {type: 'submit', 'data-action': 'fork', text: `Rerun from step ${k}`}),
      h('button', {type: 'button', text: 'Close', onclick: () => replace(el)})),
    out);
    replace(el, form);
    form.scrollIntoView({block: 'nearest'});
  }

  // comparePicker is the runs list's choice of two runs to compare: a checkbox on each
  // row (kept across the list's refreshes) and a button that opens the compare page.
  function comparePicker() {
    const picked = [];
    const go = h('button', {type: 'button', id: 'compare-selected', disabled: true, text: 'Compare the two picked runs',
      onclick: () => { location.hash = '#/compare' + q({a: picked[0], b: picked[1]}); }});
    const say = h('span.muted', {text: 'Pick two runs to compare them step by step.'});
    const bar = h('p.row.compare-bar', {}, go, say);
    const update = () => {
      go.disabled = picked.length !== 2;
      say.textContent = picked.length ? `Picked: ${picked.join(' and ')}` : 'Pick two runs to compare them step by step.';
    };
    const sync = body => {
      for (const tr of body.querySelectorAll('tr[data-run]')) {
        const id = tr.dataset.run;
        if (tr.querySelector('input[data-compare]')) continue;
        const box = h('input', {type: 'checkbox', 'data-compare': id, 'aria-label': `compare ${id}`, checked: picked.includes(id), onchange: () => {
          const i = picked.indexOf(id);
          if (box.checked && i < 0) picked.push(id);
          if (!box.checked && i >= 0) picked.splice(i, 1);
          while (picked.length > 2) {
            const old = picked.shift();
            const other = body.querySelector(`input[data-compare="${CSS.escape(old)}"]`);
            if (other) other.checked = false;
          }
          update();
        }});
        const td = tr.querySelector('td');
        if (td) td.prepend(box, ' ');
      }
    };
    return {bar, sync};
  }

  // comparePage is #/compare?a=A&b=B: the two runs' aligned steps, side by side, each
  // call's argument and result differences highlighted (JSON Patch paths), and deltas.
  async function comparePage(params) {
    const a = params.get('a') || '', b = params.get('b') || '';
    const form = h('form.filters', {onsubmit: e => { e.preventDefault(); location.hash = '#/compare' + q({a: form.elements.a.value.trim(), b: form.elements.b.value.trim()}); }},
      h('label', {for: 'cmp-a'}, 'Run A', h('input', {id: 'cmp-a', name: 'a', value: a, size: 26})),
      h('label', {for: 'cmp-b'}, 'Run B', h('input', {id: 'cmp-b', name: 'b', value: b, size: 26})),
      h('button.primary', {type: 'submit', text: 'Compare'}),
      a && b ? h('a', {href: '#/compare' + q({a: b, b: a}), text: 'Swap'}) : null);
    const out = h('div');
    replace(main, h('h1', {text: 'Compare runs'}), form, out);
    if (!a || !b) { replace(out, h('p.muted', {text: 'Give two runs of yours (or pick two in the runs list).'})); return; }
    let d;
    try { d = await api(`/v1/runs/${encodeURIComponent(a)}/diff/${encodeURIComponent(b)}`); }
    catch (e) { replace(out, errorBox(e)); return; }
    const signed = v => (v > 0 ? '+' : '') + (Number.isInteger(v) ? v : v.toFixed(4));
    const side = (label, r) => h('div', {}, h('strong', {text: label + ' '}), runLink(r.id), ' ', h('span.mono', {text: r.model}), ' ',
      status(r.status === 'done' ? r.termination : r.status), ` ${r.steps} steps`,
      r.forkedFrom ? h('span.muted', {}, ' · forked from ', runLink(r.forkedFrom.run), ` at step ${r.forkedFrom.step}`) : null);
    const t = d.totals;
    const stepNo = n => n === null || n === undefined ? '—' : String(n);
    const patchList = (cls, ops) => h('ul.' + cls, {}, ops.map(op => h('li', {},
      h('mark', {text: op.path || '/'}), ` ${op.op}`, op.value !== undefined ? h('code', {text: ' ' + compact(op.value)}) : null,
      op.from ? h('span.muted', {text: ` from ${op.from}`}) : null)));
    const callBlock = (s, c) => h('div.card.diff-call', {'data-tool': c.tool},
      h('div', {}, h('strong.mono', {text: `${c.tool} #${c.index}`}), ` step ${stepNo(s.a)} / ${stepNo(s.b)} `,
        !c.a ? h('span.status.error', {text: 'only in B'}) : !c.b ? h('span.status.error', {text: 'only in A'}) :
          c.statusChanged ? h('span', {}, status(c.a.status), ' → ', status(c.b.status)) : status(c.b.status),
        c.errorChanged ? h('div.muted', {text: `error: ${c.a.error || '—'} → ${c.b.error || '—'}`}) : null),
      (c.arguments || []).length ? h('div', {}, h('div', {text: 'Arguments changed:'}), patchList('diff-args', c.arguments)) : null,
      (c.result || []).length ? h('div', {}, h('div', {text: 'Result changed:'}), patchList('diff-result', c.result)) : null,
      c.a && c.b ? h('div.diff-sides', {}, h('div', {}, h('div.muted', {text: 'A arguments'}), jsonBlock(c.a.arguments, 'A arguments')),
        h('div', {}, h('div.muted', {text: 'B arguments'}), jsonBlock(c.b.arguments, 'B arguments'))) : null);
    const changedCall = c => !c.a || !c.b || (c.arguments || []).length || (c.result || []).length || c.statusChanged || c.errorChanged;
    replace(out, h('div.diff-view', {},
      h('div.card', {}, side('A', d.a), side('B', d.b),
        d.shared ? h('p.muted', {text: `${d.shared} step${d.shared === 1 ? '' : 's'} shared: the fork reused them (A from step ${d.a.from}, B from step ${d.b.from}).`}) : null,
        h('p', {}, h('strong', {text: `${t.changedSteps} of ${t.steps} aligned steps changed, ${t.changedCalls} of ${t.calls} calls. `}),
          `Tokens ${signed(t.tokens.delta)}, cost ${signed(t.cost.delta)}, time ${signed(t.durationMs.delta)} ms (B − A).`)),
      h('div.table-wrap', {}, h('table', {'aria-label': 'Aligned steps'},
        h('thead', {}, h('tr', {}, ['Step A', 'Step B', 'Text', 'Calls', 'Tokens Δ', 'Cost Δ', 'Time Δ'].map((c, i) => h('th' + (i > 3 ? '.num' : ''), {scope: 'col', text: c})))),
        h('tbody', {}, d.steps.map(s => h('tr' + (s.changed ? '.changed' : ''), {'data-steps': `${stepNo(s.a)}/${stepNo(s.b)}`},
          h('td.num', {text: stepNo(s.a)}), h('td.num', {text: stepNo(s.b)}),
          h('td', {}, s.textChanged ? h('div', {}, h('del', {text: s.textA || '(none)'}), h('br'), h('ins', {text: s.textB || '(none)'})) : h('span.muted', {text: 'same'})),
          h('td', {text: s.calls.map(c => `${c.tool}${changedCall(c) ? ' ≠' : ''}`).join(', ')}),
          h('td.num', {text: signed(s.tokens.delta)}), h('td.num', {text: signed(s.cost.delta)}), h('td.num', {text: signed(s.durationMs.delta)})))))),
      d.steps.flatMap(s => s.calls.filter(changedCall).map(c => callBlock(s, c)))));
  }

  start();
})();
