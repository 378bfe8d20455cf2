// The play page: draws the server's game, pushed by /api/events at every change, and sends the
// person's moves. Every API call carries the page's token; the server checks every move, this page
// only draws. The person can step back through the game (a review: the board of an earlier move,
// with the agent's search before it) without changing it.
"use strict";

const token = new URLSearchParams(location.search).get("token") || "";
const $ = (id) => document.getElementById(id);
const board = $("board");
let state = null; // the last state the server sent
let busy = false; // a request is in flight
let cells = []; // cells[y * n + x]: {el, heat, stone, pct}
let drawnSize = 0;
let viewPly = null; // reviewing: the moves shown (the position after that many); null: the game now
//: A share of the visits the board writes out (at most TOP_SHOWN moves): the ones that stand out.
const SHOWN_SHARE = 5;
const TOP_SHOWN = 5;

function columnName(x) {
  return x < 26 ? String.fromCharCode(65 + x) : "A" + String.fromCharCode(65 + x - 26);
}
function cellName(x, y, n) {
  return `${columnName(x)}${n - y}`; // rows count from the bottom, as on a printed board
}
function colourName(player) {
  return player === 1 ? "Black" : "White";
}

// --- talking to the server ---------------------------------------------------------------

async function call(path, body) {
  const options = body === undefined ? {} : {
    method: "POST",
    headers: {"Content-Type": "application/json"},
    body: JSON.stringify(body),
  };
  const response = await fetch(`/api/${path}?token=${encodeURIComponent(token)}`, options);
  let data;
  try {
    data = await response.json();
  } catch {
    data = {error: `the server answered HTTP ${response.status}`};
  }
  if (!response.ok) throw new Error(data.error || `the server answered HTTP ${response.status}`);
  return data;
}

// Runs one request; shows its error, and redraws from the server's state either way.
async function act(path, body, pending) {
  if (busy) return;
  setBusy(true);
  showError("");
  viewPly = null;
  if (pending) draw(pending, true);
  try {
    state = await call(path, body);
  } catch (e) {
    showError(e.message);
    try {
      state = await call("state");
    } catch (e2) {
      showError(`${e.message} (and the server does not answer: ${e2.message})`);
    }
  } finally {
    setBusy(false);
  }
  if (state) draw(state, false);
}

// The server pushes the game at every change (the agent thinking, its move): nothing is polled.
function listen() {
  const events = new EventSource(`/api/events?token=${encodeURIComponent(token)}`);
  events.onmessage = (event) => {
    state = JSON.parse(event.data);
    if (lostServer) showError("");
    lostServer = false;
    draw(state, false);
  };
  events.onerror = () => {
    lostServer = true;
    showError("Lost the connection to the server: trying again…");
  };
}
let lostServer = false;

function setBusy(value) {
  busy = value;
  document.body.dataset.busy = value ? "1" : "0";
}

function showError(message) {
  $("error").textContent = message;
  $("error").hidden = !message;
}

function simulations() {
  const input = $("simulations");
  const value = Number(input.value);
  const max = state ? state.max_simulations : 1;
  if (!Number.isInteger(value) || value < 1 || value > max) {
    throw new Error(`Simulations per move must be a whole number from 1 to ${max}.`);
  }
  return value;
}

// --- the person's actions ----------------------------------------------------------------

function play(x, y) {
  if (busy || !state) return;
  if (viewPly !== null) return showError("You are stepping through the game: “Back to the game” to play on.");
  const n = state.board_size;
  if (state.result) return showError("The game is over: start a new game, or undo.");
  if (state.to_play !== state.human || state.thinking) return showError("Wait: it is the agent's turn.");
  if (state.board[y * n + x] !== 0) return showError(`${cellName(x, y, n)} is taken: play an empty cell.`);
  let sims;
  try {
    sims = simulations();
  } catch (e) {
    return showError(e.message);
  }
  const pending = structuredClone(state);
  pending.board[y * n + x] = state.human;
  pending.moves.push([x, y]);
  pending.to_play = -state.human;
  act("move", {x, y, simulations: sims}, pending);
}

function newGame(colour) {
  let sims;
  try {
    sims = simulations();
  } catch (e) {
    return showError(e.message);
  }
  const pending = colour === "white" && state ? {
    ...structuredClone(state), board: state.board.map(() => 0), moves: [], human: -1, to_play: 1,
    result: null, analysis: null,
  } : null;
  act("new", {colour, simulations: sims}, pending);
}

$("new-black").addEventListener("click", () => newGame("black"));
$("new-white").addEventListener("click", () => newGame("white"));
$("banner-black").addEventListener("click", () => newGame("black"));
$("banner-white").addEventListener("click", () => newGame("white"));
$("banner-review").addEventListener("click", () => review(0));
$("undo").addEventListener("click", () => act("undo", {}));
$("first").addEventListener("click", () => review(0));
$("back").addEventListener("click", () => review(shownPly() - 1));
$("forward").addEventListener("click", () => review(shownPly() + 1));
$("live").addEventListener("click", () => review(null));
document.addEventListener("keydown", (event) => {
  if (!state || event.target instanceof HTMLInputElement) return;
  const step = {ArrowLeft: shownPly() - 1, ArrowRight: shownPly() + 1, Home: 0, End: null, Escape: null};
  if (!(event.key in step)) return;
  event.preventDefault();
  review(step[event.key]);
});

// --- stepping through the game -----------------------------------------------------------

function shownPly() {
  return viewPly === null ? state.moves.length : viewPly;
}

// Shows the position after `ply` moves (null, or the last move: the game as it is now).
function review(ply) {
  if (!state) return;
  showError("");
  viewPly = ply === null || ply >= state.moves.length ? null : Math.max(0, ply);
  draw(state, false);
}

// The game as the board shows it: the live one, or an earlier position under review.
function shown(s) {
  const ply = viewPly === null ? s.moves.length : viewPly;
  if (ply === s.moves.length) return {...s, ply, live: true};
  const n = s.board_size;
  const board = new Array(n * n).fill(0);
  s.moves.slice(0, ply).forEach(([x, y], i) => {
    board[y * n + x] = i % 2 === 0 ? 1 : -1;
  });
  return {...s, ply, live: false, board, moves: s.moves.slice(0, ply), result: null,
    to_play: ply % 2 === 0 ? 1 : -1, analysis: s.analyses.find((a) => a.ply === ply - 1) || null};
}
$("show-heat").addEventListener("change", () => state && draw(state, false));
window.addEventListener("resize", () => state && sizeBoard(state.board_size));

// --- drawing -----------------------------------------------------------------------------

function buildBoard(n) {
  board.replaceChildren();
  board.style.gridTemplateColumns = `repeat(${n + 2}, var(--cell))`;
  cells = new Array(n * n);
  const label = (text) => {
    const el = document.createElement("div");
    el.className = "label";
    el.textContent = text;
    board.appendChild(el);
  };
  const columnLabels = () => {
    label("");
    for (let x = 0; x < n; x++) label(columnName(x));
    label("");
  };
  const stars = starPoints(n);
  columnLabels();
  for (let y = 0; y < n; y++) {
    label(String(n - y));
    for (let x = 0; x < n; x++) {
      const el = document.createElement("button");
      el.type = "button";
      el.className = "cell";
      if (x === 0) el.classList.add("left");
      if (x === n - 1) el.classList.add("right");
      if (y === 0) el.classList.add("top");
      if (y === n - 1) el.classList.add("bottom");
      el.dataset.x = String(x);
      el.dataset.y = String(y);
      el.setAttribute("aria-label", cellName(x, y, n));
      if (stars.has(y * n + x)) {
        el.classList.add("star");
        el.appendChild(Object.assign(document.createElement("span"), {className: "dot"}));
      }
      const heat = Object.assign(document.createElement("span"), {className: "heat"});
      const stone = Object.assign(document.createElement("span"), {className: "stone"});
      const pct = Object.assign(document.createElement("span"), {className: "pct"});
      el.append(heat, stone, pct);
      el.addEventListener("click", () => play(x, y));
      board.appendChild(el);
      cells[y * n + x] = {el, heat, stone, pct};
    }
    label(String(n - y));
  }
  columnLabels();
  drawnSize = n;
  sizeBoard(n);
}

function starPoints(n) {
  const points = new Set();
  const centre = (n - 1) / 2;
  if (n % 2 === 1 && n >= 7) points.add(centre * n + centre);
  const edge = n >= 13 ? 3 : n >= 9 ? 2 : -1;
  if (edge >= 0) {
    for (const y of [edge, n - 1 - edge]) for (const x of [edge, n - 1 - edge]) points.add(y * n + x);
  }
  return points;
}

function sizeBoard(n) {
  const panel = window.innerWidth > 860 ? 470 : 40;
  const room = Math.min(window.innerWidth - panel, window.innerHeight - 40);
  const cell = Math.max(22, Math.min(60, Math.floor(room / (n + 2))));
  document.documentElement.style.setProperty("--cell", `${cell}px`);
}

function draw(game, thinking) {
  const n = game.board_size;
  if (n !== drawnSize) buildBoard(n);
  if (viewPly !== null && viewPly >= game.moves.length) viewPly = null;
  const s = shown(game);
  const waiting = thinking || s.thinking;
  $("rules").textContent = `${n}×${n} · ${s.n_in_row} in a row${s.rule === "exact" ? ", exactly" : ""}`;
  $("agent-info").textContent = `Agent: ${s.label || "trained agent"} · training step ${s.step}`;
  if (document.activeElement !== $("simulations")) $("simulations").value = String(s.simulations);
  $("simulations").max = String(s.max_simulations);

  const last = s.moves.length ? s.moves[s.moves.length - 1] : null;
  const winning = new Set((s.result ? s.result.line : []).map(([x, y]) => y * n + x));
  const analysis = s.analysis;
  const showHeat = !waiting && analysis && analysis.ply === s.moves.length - 1 && $("show-heat").checked;
  const total = analysis ? analysis.visits.reduce((a, b) => a + b, 0) : 0;
  const most = analysis ? Math.max(1, ...analysis.visits) : 1;
  // The moves whose share the board writes out: the few the search spent itself on.
  const standing = new Set(
    (analysis ? analysis.visits.map((v, i) => [v, i]) : [])
      .filter(([v]) => total && (100 * v) / total >= SHOWN_SHARE)
      .sort((a, b) => b[0] - a[0])
      .slice(0, TOP_SHOWN)
      .map(([, i]) => i),
  );
  for (let i = 0; i < n * n; i++) {
    const {el, heat, stone, pct} = cells[i];
    const x = i % n, y = Math.floor(i / n);
    const stoneColour = s.board[i] === 1 ? "black" : s.board[i] === -1 ? "white" : "";
    stone.className = "stone" + (stoneColour ? ` ${stoneColour}` : "");
    if (last && last[0] === x && last[1] === y) stone.classList.add("last");
    if (winning.has(i)) stone.classList.add("winning");
    el.classList.toggle("empty", !stoneColour);
    const visits = showHeat ? analysis.visits[i] : 0;
    el.classList.toggle("heated", visits > 0);
    heat.style.opacity = visits > 0 ? String(0.12 + 0.7 * (visits / most)) : "";
    const share = total ? (100 * visits) / total : 0;
    // Written out where it stands out; the shading (and hovering) shows the rest.
    pct.textContent = visits > 0 && standing.has(i) ? `${Math.round(share)}%` : "";
    const where = cellName(x, y, n);
    el.title = visits > 0 ? `${where}: ${plural(visits, "visit")} (${share.toFixed(1)}%)` : where;
    el.dataset.visits = String(visits);
  }
  const idle = s.live && !waiting && !s.result && s.to_play === s.human;
  board.className = idle ? `you-${colourName(s.human).toLowerCase()}` : "waiting";

  drawStatus(s, waiting);
  drawBanner(s);
  drawAnalysis(s, analysis, total);
  drawMoves(game, s);
  $("undo").disabled = busy || !game.can_undo;
  for (const id of ["new-black", "new-white", "banner-black", "banner-white"]) $(id).disabled = busy;
  $("first").disabled = s.ply === 0;
  $("back").disabled = s.ply === 0;
  $("forward").disabled = s.live;
  $("live").disabled = s.live;
}

function drawBanner(s) {
  const result = s.live ? s.result : null;
  $("banner").hidden = !result;
  if (!result) return;
  const you = `you played ${colourName(s.human)}`;
  const text = {
    human: `You win! ${s.n_in_row} in a row, in ${s.moves.length} moves (${you}).`,
    agent: `The agent wins: ${s.n_in_row} in a row, in ${s.moves.length} moves (${you}).`,
    draw: `A draw: the board is full (${you}).`,
  };
  $("banner-text").textContent = text[result.winner];
  $("banner").className = {human: "won", agent: "lost", draw: "drawn"}[result.winner];
}

function plural(count, word) {
  return `${count} ${word}${count === 1 ? "" : "s"}`;
}

function drawStatus(s, waiting) {
  const status = $("status");
  status.className = "";
  const you = `you play ${colourName(s.human)}`;
  if (!s.live) {
    status.textContent = `Reviewing: the board after move ${s.ply} of ${state.moves.length} (← → to step).`;
    status.className = "reviewing";
  } else if (s.result) {
    const text = {human: "You win!", agent: "The agent wins.", draw: "Draw: the board is full."};
    status.textContent = `${text[s.result.winner]} (you played ${colourName(s.human)})`;
    status.className = {human: "won", agent: "lost", draw: "drawn"}[s.result.winner];
  } else if (waiting) {
    status.textContent = `The agent (${colourName(-s.human)}) is thinking…`;
    status.className = "thinking";
  } else if (s.to_play === s.human) {
    status.textContent = `Your turn: ${you}.`;
  } else {
    status.textContent = `The agent's turn (${colourName(-s.human)}).`;
  }
}

function drawAnalysis(s, analysis, total) {
  const n = s.board_size;
  const list = $("top-moves");
  list.replaceChildren();
  $("value-bar").hidden = $("value-sides").hidden = !analysis;
  if (!analysis) {
    $("value").textContent = s.live ? "The agent has not moved yet." : "The agent did not search here.";
    return;
  }
  const v = analysis.value;
  const chance = Math.round(50 * (v + 1));
  const sign = v >= 0 ? "+" : "−";
  const [mx, my] = s.moves[analysis.ply];
  $("value").textContent =
    `Agent's estimate: ${sign}${Math.abs(v).toFixed(2)} (its win chances ≈ ${chance}%), ` +
    `before its move ${analysis.ply + 1}, ${cellName(mx, my, n)}.`;
  $("value-fill").style.width = `${chance}%`;
  $("value-fill").style.background = s.human === 1 ? "#f4f4f4" : "#222";
  $("value-bar").style.background = s.human === 1 ? "#222" : "#f4f4f4";
  $("value-sides").textContent =
    `agent (${colourName(-s.human)}) ${chance}% · you (${colourName(s.human)}) ${100 - chance}%`;
  const ranked = analysis.visits
    .map((visits, i) => [visits, i])
    .filter(([visits]) => visits > 0)
    .sort((a, b) => b[0] - a[0])
    .slice(0, 5);
  for (const [visits, i] of ranked) {
    const item = document.createElement("li");
    const share = total ? ((100 * visits) / total).toFixed(1) : "0";
    item.textContent = `${cellName(i % n, Math.floor(i / n), n)}: ${plural(visits, "visit")} (${share}%)`;
    list.appendChild(item);
  }
  const summary = document.createElement("li");
  summary.className = "summary";
  summary.style.listStyle = "none";
  summary.textContent =
    `${plural(total, "visit")} in ${analysis.seconds.toFixed(2)} s (${analysis.simulations} simulations asked)`;
  list.appendChild(summary);
}

// Every move of the game, the one shown marked; a click shows the board after it.
function drawMoves(game, s) {
  const n = game.board_size;
  const list = $("move-list");
  list.replaceChildren();
  game.moves.forEach(([x, y], i) => {
    const player = i % 2 === 0 ? 1 : -1;
    const item = document.createElement("li");
    const who = player === game.human ? " (you)" : "";
    item.textContent = `${i + 1}. ${player === 1 ? "●" : "○"} ${cellName(x, y, n)}${who}`;
    item.classList.toggle("shown", i === s.ply - 1);
    item.addEventListener("click", () => review(i + 1));
    list.appendChild(item);
  });
  if (s.live) list.scrollTop = list.scrollHeight;
  $("review-note").hidden = s.live;
  $("review-note").textContent = s.live ? "" : "The game goes on where you left it: “Back to the game”.";
}

setBusy(false);
listen();
