/*
 * The authoritative game client. The trainer drives it over an RTCDataChannel: each message is
 * answered from the data channel's handler (never from requestAnimationFrame, which would cap
 * training at the display rate); drawing runs on its own at display rate.
 *
 * One page at a time: when another page takes the connection over, the trainer says so
 * ("replaced") and this page stops, offering to take it back. When the run ends the trainer says
 * how ("ended") before it closes the connection: the page says so, closes its side and stays
 * away. Any other lost connection is retried with exponential back-off, forever; a refused token
 * is not retried.
 */
(async function () {
  "use strict";
  const Rules = window.FighterRules;
  const Draw = window.FighterDraw;
  const params = new URLSearchParams(location.search);
  const token = params.get("token") || "";
  const C = await (await fetch("/static/constants.json")).json();
  const MAX_MESSAGE_BYTES = 64 * 1024;
  const { PHASE_TEXT, ENDED } = Draw; // the words the header shows
  const BACKOFF_S = [0.5, 8];
  const state = {
    games: [], opponent: "", episode: -1, step: 0, actions: [], handled: 0,
    status: null, connection: "connecting", attempts: 0, replaced: "", retryIn: 0, ended: "",
    counted: { won: 0, lost: 0, drawn: 0 },
  };
  const $ = (id) => document.getElementById(id);
  let current = null; // {pc, channel, peer, closed}

  // ---- the protocol ----

  function isInt(v) {
    return typeof v === "number" && Number.isInteger(v);
  }

  function countEnded(before) {
    // Rounds as the page sees them end (until the trainer's own count arrives in a status).
    state.games.forEach((g, i) => {
      if (g.done && !(before[i] && before[i].done)) {
        const key = g.winner === 0 ? "won" : g.winner === 1 ? "lost" : "drawn";
        state.counted[key] += 1;
      }
    });
  }

  function handle(raw) {
    if (typeof raw !== "string" || raw.length > MAX_MESSAGE_BYTES) {
      return { type: "error", message: "message too large or not text" };
    }
    let m;
    try {
      m = JSON.parse(raw);
    } catch (e) {
      return { type: "error", message: "malformed JSON message" };
    }
    if (m === null || typeof m !== "object") return { type: "error", message: "a message must be an object" };
    if (m.type === "ping" && isInt(m.id)) return { type: "pong", id: m.id };
    if (m.type === "status") {
      state.status = m; // shown by the drawing loop; never answered
      return null;
    }
    if (m.type === "replaced") {
      state.replaced = String(m.message || "another page took over the connection");
      return null;
    }
    if (m.type === "ended") {
      // The run's last message: never answered; the connection is closed from this side.
      state.ended = Object.prototype.hasOwnProperty.call(ENDED, m.status) ? m.status : "ended";
      if (state.status && isInt(m.steps)) state.status = Object.assign({}, state.status, { steps: m.steps, steps_per_s: 0 });
      return null;
    }
    if (m.type === "reset" && isInt(m.episode) && Array.isArray(m.seeds) && m.seeds.every(isInt)) {
      let fresh;
      try {
        fresh = m.seeds.map((seed) => Rules.newGame(C, seed, m.opponent));
      } catch (e) {
        return { type: "error", message: String(e.message || e) };
      }
      if (m.arenas === undefined) {
        state.games = fresh;
      } else {
        const ok = Array.isArray(m.arenas) && m.arenas.length === fresh.length &&
          m.arenas.every((i) => isInt(i) && i >= 0 && i < state.games.length);
        if (!ok) return { type: "error", message: "cannot restart arenas " + JSON.stringify(m.arenas) };
        m.arenas.forEach((i, k) => { state.games[i] = fresh[k]; });
      }
      state.opponent = m.opponent;
      state.episode = m.episode;
      state.step = 0;
      return result();
    }
    if (m.type === "step" && isInt(m.episode) && isInt(m.step) && Array.isArray(m.actions)) {
      if (m.episode !== state.episode) return { type: "error", message: "step for episode " + m.episode + ", but episode " + state.episode + " is running" };
      if (m.actions.length !== state.games.length) return { type: "error", message: m.actions.length + " actions for " + state.games.length + " arenas" };
      if (!m.actions.every((a) => isInt(a) && a >= 0 && a < C.actions.length)) return { type: "error", message: "actions must be integers in 0.." + (C.actions.length - 1) };
      const before = state.games.map((g) => ({ done: g.done }));
      m.actions.forEach((a, i) => {
        if (!state.games[i].done) Rules.step(C, state.games[i], a);
      });
      countEnded(before);
      state.step = m.step;
      state.actions = m.actions;
      state.handled += 1;
      return result();
    }
    return { type: "error", message: "unexpected or malformed message of type " + JSON.stringify(m.type) };
  }

  const GAME_KEYS = ["frame", "rng", "done", "winner", "hold", "held"];
  const FIGHTER_KEYS = ["x", "y", "vx", "vy", "hp", "facing", "state", "timer", "elapsed", "hit", "cooldown"];

  function pack(g) {
    // The wire format of protocol.py's pack_game: 30 integers per arena.
    const out = GAME_KEYS.map((k) => (k === "done" ? (g.done ? 1 : 0) : g[k]));
    out.push(g.dealt[0], g.dealt[1]);
    g.fighters.forEach((f) => FIGHTER_KEYS.forEach((k) => out.push(f[k])));
    return out;
  }

  function result() {
    return { type: "result", episode: state.episode, step: state.step, games: state.games.map(pack) };
  }

  function answer(channel, data) {
    const reply = handle(data);
    if (reply !== null) channel.send(JSON.stringify(reply));
    if (state.ended) close(current); // the trainer waits for this page to close its side
  }

  // ---- the connection ----

  function setConnection(name) {
    state.connection = name;
  }

  function close(conn) {
    // The run has ended: this connection closes, and none is made again.
    setConnection("ended");
    if (!conn || conn.closed) return;
    conn.closed = true;
    if (conn.pc) conn.pc.close();
    if (conn.peer) conn.peer.destroy();
    else if (conn.channel) conn.channel.close();
  }

  function lost(conn, why) {
    // The connection `conn` ended: retry, unless the run ended, it was replaced or refused, or is already old.
    if (conn !== current || conn.closed) return;
    if (state.ended) return close(conn);
    conn.closed = true;
    if (state.replaced) {
      setConnection("replaced");
      watchTrainer(conn);
      return;
    }
    if (why === "refused") {
      setConnection("refused");
      return;
    }
    retry();
  }

  function watchTrainer(conn) {
    // A replaced page hears nothing more from the trainer: it asks for its own address now and then
    // to learn when the trainer has gone (the run ended, or stopped), and stops offering to take over.
    setTimeout(() => conn === current && state.connection === "replaced" && fetch(location.href, { cache: "no-store" })
      .then(() => watchTrainer(conn), () => { state.trainerGone = true; }), 3000);
  }

  function retry() {
    state.attempts += 1;
    const delay = Math.min(BACKOFF_S[1], BACKOFF_S[0] * 2 ** (state.attempts - 1));
    setConnection("reconnecting");
    state.retryIn = delay;
    const started = performance.now();
    const tick = setInterval(() => {
      state.retryIn = Math.max(0, delay - (performance.now() - started) / 1000);
    }, 200);
    setTimeout(() => {
      clearInterval(tick);
      connect();
    }, delay * 1000);
  }

  function opened(conn) {
    // Our hello: the trainer takes this page over only once it has it.
    conn.channel.send(JSON.stringify({ type: "hello", client: "browser" }));
    state.attempts = 0;
    setConnection("connected");
  }

  function loopbackOnly(sdp) {
    // Served from this machine to a browser on it: keep the connection on the loopback interface.
    const lines = sdp.split("\r\n");
    const loopback = lines.filter((l) => l.startsWith("a=candidate") && / 127\.0\.0\.1 /.test(l));
    if (loopback.length === 0) return sdp;
    return lines.filter((l) => !l.startsWith("a=candidate") || loopback.includes(l)).join("\r\n");
  }

  function loadScript(src) {
    return new Promise((resolve, reject) => {
      const s = document.createElement("script");
      s.src = src;
      s.onload = resolve;
      s.onerror = () => reject(new Error("cannot load " + src));
      document.head.appendChild(s);
    });
  }

  async function connectPeerJS(conn) {
    // Signaling through a PeerJS server: our own PeerJS id, the trainer's id from the URL, the
    // run's token in the connection's metadata. Trickled candidates: the trainer keeps loopback ones.
    if (!window.Peer) await loadScript("/static/peerjs.min.js");
    const server = new URL(params.get("peerjs"));
    const id = "framework-page-" + Math.random().toString(16).slice(2, 18);
    const peer = new window.Peer(id, {
      host: server.hostname,
      port: Number(server.port) || (server.protocol === "https:" ? 443 : 80),
      path: server.pathname,
      key: params.get("key") || "peerjs",
      secure: server.protocol === "https:",
      config: { iceServers: [] },
    });
    conn.peer = peer;
    peer.on("error", () => lost(conn, "error"));
    peer.on("open", () => {
      const dc = peer.connect(params.get("peer"), { serialization: "raw", reliable: true, metadata: { token: token } });
      conn.channel = dc;
      dc.on("open", () => opened(conn));
      dc.on("data", (data) => answer(dc, data));
      dc.on("close", () => lost(conn, "closed"));
    });
  }

  async function connectDirect(conn) {
    const pc = new RTCPeerConnection({ iceServers: [] });
    conn.pc = pc;
    const channel = pc.createDataChannel("game");
    conn.channel = channel;
    channel.onopen = () => opened(conn);
    channel.onclose = () => lost(conn, "closed");
    channel.onmessage = (event) => answer(channel, event.data);
    pc.onconnectionstatechange = () => {
      if (pc.connectionState === "failed" || pc.connectionState === "closed") lost(conn, "closed");
    };
    await pc.setLocalDescription(await pc.createOffer());
    await new Promise((resolve) => {
      if (pc.iceGatheringState === "complete") return resolve();
      pc.onicegatheringstatechange = () => pc.iceGatheringState === "complete" && resolve();
      setTimeout(resolve, 5000);
    });
    const response = await fetch("/offer", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ sdp: loopbackOnly(pc.localDescription.sdp), type: "offer", token: token }),
    });
    if (response.status === 403) return lost(conn, "refused");
    if (!response.ok) throw new Error("HTTP " + response.status);
    await pc.setRemoteDescription(await response.json());
  }

  async function connect() {
    if (state.ended) return;
    if (current) {
      current.closed = true;
      if (current.pc) current.pc.close();
      if (current.peer) current.peer.destroy();
    }
    state.replaced = "";
    state.trainerGone = false;
    const conn = { pc: null, channel: null, peer: null, closed: false };
    current = conn;
    setConnection(state.attempts ? "reconnecting" : "connecting");
    try {
      await (params.get("peerjs") ? connectPeerJS(conn) : connectDirect(conn));
    } catch (e) {
      lost(conn, "error"); // the trainer is not reachable (yet, or any more): try again
    }
  }

  $("take-over").onclick = () => {
    state.attempts = 0;
    connect();
  };

  // ---- the page: header figures, banner and arenas, drawn at display rate ----

  const canvases = [];
  const effects = [];
  let layoutKey = "";
  let lastCount = 0;
  let lastTime = performance.now();
  let pageRate = 0;

  function layout(n) {
    // A grid that fills the area below the header with 2:1 arenas, as large as they fit.
    const area = $("arenas");
    const W = area.clientWidth - 16;
    const H = area.clientHeight - 16;
    const key = n + "x" + W + "x" + H + "x" + devicePixelRatio;
    if (key === layoutKey) return;
    layoutKey = key;
    while (canvases.length < n) {
      const c = document.createElement("canvas");
      c.className = "arena";
      area.appendChild(c);
      canvases.push(c);
      effects.push({ flash: [0, 0], sparks: [], frame: -1 });
    }
    canvases.forEach((c, i) => (c.style.display = i < n ? "block" : "none"));
    let best = { cols: 1, w: 0 };
    for (let cols = 1; cols <= n; cols++) {
      const rows = Math.ceil(n / cols);
      const w = Math.min((W - 8 * (cols - 1)) / cols, 2 * ((H - 8 * (rows - 1)) / rows));
      if (w > best.w) best = { cols: cols, w: w };
    }
    area.style.gridTemplateColumns = `repeat(${best.cols}, ${Math.floor(best.w)}px)`;
    const w = Math.max(120, Math.floor(best.w));
    for (let i = 0; i < n; i++) {
      const c = canvases[i];
      c.style.width = w + "px";
      c.style.height = Math.round(w / 2) + "px";
      c.width = Math.round(w * devicePixelRatio);
      c.height = Math.round((w / 2) * devicePixelRatio);
    }
  }

  function header(now) {
    const s = state.status;
    const arenas = state.games.length;
    if (now - lastTime >= 500) {
      pageRate = ((state.handled - lastCount) * arenas * 1000) / (now - lastTime);
      lastCount = state.handled;
      lastTime = now;
    }
    const status = $("status");
    const labels = {
      connecting: "connecting",
      connected: "connected",
      reconnecting: `reconnecting in ${state.retryIn.toFixed(1)} s (attempt ${state.attempts})`,
      replaced: "disconnected: another page took over",
      ended: "disconnected: the run has ended",
      refused: "refused: wrong or missing token",
    };
    status.dataset.state = state.connection;
    status.textContent = labels[state.connection] || state.connection;
    const replaced = state.connection === "replaced";
    const phase = state.ended ? state.ended : s && state.connection === "connected" ? s.phase
      : replaced ? (state.trainerGone ? "gone" : "inactive") : "waiting";
    $("phase").dataset.phase = phase;
    $("phase").textContent = state.ended ? ENDED[state.ended][0] : PHASE_TEXT[phase] || phase;
    // The trainer's own figures when it sends them; else what this page counts.
    $("steps").textContent = (s ? s.steps : state.handled * arenas).toLocaleString("en");
    $("rate").textContent = Math.round(s ? s.steps_per_s : pageRate).toLocaleString("en");
    const rounds = s ? { won: s.rounds[0], lost: s.rounds[1], drawn: s.rounds[2] } : state.counted;
    document.querySelector("#rounds .won").textContent = rounds.won;
    document.querySelector("#rounds .lost").textContent = rounds.lost;
    document.querySelector("#rounds .drawn").textContent = rounds.drawn;
    $("arena-count").textContent = arenas;
    $("action").textContent = state.actions.length ? C.actions[state.actions[0]] : "-";
    $("opponent-name").textContent = state.opponent ? `opponent (${state.opponent})` : "opponent";
    let banner = "";
    if (state.ended) banner = ENDED[state.ended][1] + " This page no longer connects; a new run opens a page of its own.";
    else if (replaced && state.trainerGone) banner = "The trainer no longer answers: its run has ended or was stopped (its output says how).";
    else if (replaced) banner = state.replaced + ". Training goes on with the other page.";
    else if (state.connection === "refused") banner = "The trainer refused this page: open the address the trainer printed, with its token.";
    else if (state.connection === "reconnecting") banner = "Lost the connection to the trainer; reconnecting by itself.";
    else if (phase === "updating") banner = "The trainer is updating its policy from the rounds it played: the game resumes when it is done.";
    else if (phase === "evaluating") banner = "The trainer is evaluating its policy against scripted opponents; training resumes after it.";
    document.body.dataset.ended = state.ended; // the arenas dimmed: their game is over
    $("banner").hidden = !banner;
    $("banner-text").textContent = banner;
    $("take-over").hidden = !replaced || Boolean(state.trainerGone);
  }

  function draw(now) {
    const n = state.games.length;
    layout(n);
    const names = ["agent", state.opponent || "opponent"];
    state.games.forEach((g, i) => {
      const c = canvases[i];
      const ctx = c.getContext("2d");
      ctx.setTransform(devicePixelRatio, 0, 0, devicePixelRatio, 0, 0);
      Draw.drawArena(ctx, c.width / devicePixelRatio, c.height / devicePixelRatio, C, g, effects[i], names);
    });
    header(now);
    schedule();
  }

  // Display rate by default; a page nobody looks at (headless) redraws `fps` times a second.
  const fps = Number(params.get("fps")) || 0;
  const schedule = () => (fps > 0 ? setTimeout(() => draw(performance.now()), 1000 / fps) : requestAnimationFrame(draw));
  window.addEventListener("resize", () => (layoutKey = ""));
  schedule();
  window.fighterState = state;
  connect();
})();
