/*
 * The authoritative game client. The trainer drives it over an RTCDataChannel: each message is
 * answered from the data channel's handler (never from requestAnimationFrame, which would cap
 * training at the display rate); drawing runs on its own at display rate.
 */
(async function () {
  "use strict";
  const Rules = window.FighterRules;
  const params = new URLSearchParams(location.search);
  const token = params.get("token") || "";
  const C = await (await fetch("/static/constants.json")).json();
  const MAX_MESSAGE_BYTES = 64 * 1024;
  const state = { games: [], episode: -1, step: 0, actions: [], handled: 0 };
  const $ = (id) => document.getElementById(id);

  function status(text) {
    $("status").textContent = text;
    $("status").className = text.split(" ")[0];
  }

  function isInt(v) {
    return typeof v === "number" && Number.isInteger(v);
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
      state.episode = m.episode;
      state.step = 0;
      return result();
    }
    if (m.type === "step" && isInt(m.episode) && isInt(m.step) && Array.isArray(m.actions)) {
      if (m.episode !== state.episode) return { type: "error", message: "step for episode " + m.episode + ", but episode " + state.episode + " is running" };
      if (m.actions.length !== state.games.length) return { type: "error", message: m.actions.length + " actions for " + state.games.length + " arenas" };
      if (!m.actions.every((a) => isInt(a) && a >= 0 && a < C.actions.length)) return { type: "error", message: "actions must be integers in 0.." + (C.actions.length - 1) };
      m.actions.forEach((a, i) => {
        if (!state.games[i].done) Rules.step(C, state.games[i], a);
      });
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

  function loopbackOnly(sdp) {
    // Served from this machine to a browser on it: keep the connection on the loopback interface.
    const lines = sdp.split("\r\n");
    const loopback = lines.filter((l) => l.startsWith("a=candidate") && / 127\.0\.0\.1 /.test(l));
    if (loopback.length === 0) return sdp;
    return lines.filter((l) => !l.startsWith("a=candidate") || loopback.includes(l)).join("\r\n");
  }

  function serve(channel, kind) {
    // The same protocol over either signaling: answer every message from the channel's handler.
    channel.send(JSON.stringify({ type: "hello", client: "browser" }));
    status("connected" + kind);
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

  async function connectPeerJS() {
    // Signaling through a PeerJS server: our own PeerJS id, the trainer's id from the URL, the
    // run's token in the connection's metadata. Trickled candidates: the trainer keeps loopback ones.
    status("connecting (PeerJS)");
    await loadScript("/static/peerjs.min.js");
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
    peer.on("error", (e) => status("refused (PeerJS: " + (e.message || e.type) + ")"));
    peer.on("open", () => {
      const conn = peer.connect(params.get("peer"), { serialization: "raw", reliable: true, metadata: { token: token } });
      conn.on("open", () => serve(conn, " (PeerJS)"));
      conn.on("data", (data) => conn.send(JSON.stringify(handle(data))));
      conn.on("close", () => status("disconnected"));
    });
  }

  async function connect() {
    if (params.get("peerjs")) return connectPeerJS();
    status("connecting");
    const pc = new RTCPeerConnection({ iceServers: [] });
    const channel = pc.createDataChannel("game");
    channel.onopen = () => serve(channel, "");
    channel.onclose = () => status("disconnected");
    channel.onmessage = (event) => channel.send(JSON.stringify(handle(event.data)));
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
    if (!response.ok) {
      status("refused (HTTP " + response.status + ")");
      return;
    }
    await pc.setRemoteDescription(await response.json());
  }

  // ---- drawing, at display rate, independent of stepping ----
  const STATE_COLORS = { 5: "#ffe65a", 6: "#ffb05a", 7: "#ff5af0", 8: "#ffffff", 9: "#666" };
  const canvases = [];
  let lastCount = 0;
  let lastTime = performance.now();

  function canvasFor(i, n) {
    while (canvases.length < n) {
      const c = document.createElement("canvas");
      $("arenas").appendChild(c);
      canvases.push(c);
    }
    const c = canvases[i];
    const w = n === 1 ? 800 : n <= 4 ? 400 : 260;
    if (c.width !== w) {
      c.width = w;
      c.height = Math.round(w / 2);
    }
    return c;
  }

  function drawArena(c, g) {
    const ctx = c.getContext("2d");
    const s = c.width / C.stage_width;
    const floor = c.height - 20;
    ctx.clearRect(0, 0, c.width, c.height);
    ctx.fillStyle = "#463c32";
    ctx.fillRect(0, floor, c.width, 20);
    g.fighters.forEach((f, i) => {
      const tall = f.state === 9 ? 15 : f.state === 3 ? 0.4 * c.height : 0.55 * c.height;
      const x = (f.x - C.fighter_width / 2) * s;
      const top = floor - tall - f.y * s * 1.2;
      ctx.fillStyle = i === 0 ? "#50aaff" : "#ff6e5a";
      ctx.fillRect(x, top, C.fighter_width * s, tall);
      const attack = ["punch", "kick", "special"][f.state - 5];
      if (attack) {
        ctx.fillStyle = STATE_COLORS[f.state];
        const reach = C.attacks[attack].reach * s;
        const x0 = f.x * s;
        ctx.fillRect(f.facing > 0 ? x0 : x0 - reach, top + tall * 0.25, reach, 6);
      }
      const bar = (c.width / 2 - 30) * (f.hp / C.max_hp);
      ctx.fillStyle = "#782828";
      ctx.fillRect(i === 0 ? 10 : c.width / 2 + 20, 8, c.width / 2 - 30, 10);
      ctx.fillStyle = "#5adc6e";
      ctx.fillRect(i === 0 ? 10 : c.width - 10 - bar, 8, bar, 10);
    });
    ctx.fillStyle = "#dde";
    ctx.font = "12px system-ui";
    const left = Math.max(0, Math.ceil((C.round_frames - g.frame) / 60));
    ctx.fillText(left + " s", c.width / 2 - 10, 34);
    if (g.done) ctx.fillText(g.winner === 0 ? "agent wins" : g.winner === 1 ? "opponent wins" : "draw", c.width / 2 - 30, 50);
  }

  function draw(now) {
    state.games.forEach((g, i) => drawArena(canvasFor(i, state.games.length), g));
    if (now - lastTime >= 500) {
      $("rate").textContent = Math.round(((state.handled - lastCount) * 1000) / (now - lastTime));
      lastCount = state.handled;
      lastTime = now;
      $("episode").textContent = state.episode;
      $("action").textContent = state.actions.length ? C.actions[state.actions[0]] : "-";
    }
    schedule();
  }

  // Display rate by default; a page nobody looks at (headless) redraws `fps` times a second.
  const fps = Number(params.get("fps")) || 0;
  const schedule = () => (fps > 0 ? setTimeout(() => draw(performance.now()), 1000 / fps) : requestAnimationFrame(draw));
  schedule();
  window.fighterState = state;
  connect().catch((e) => status("failed: " + e));
})();
