// The play page: draws the server's game, pushed by /api/events at every change, and sends the
// person's moves. Every API call carries the page's token; the server checks every move, this page
// only draws. The person can step back through the game (a review: the board of an earlier move,
// with the agent's search before it) without changing it. The drawing is board.js's.
"use strict";

const token = new URLSearchParams(location.search).get("token") || "";
const $ = (id) => document.getElementById(id);
const board = $("board");
let state = null; // the last state the server sent
let busy = false; // a request is in flight
let requests = 0; // the number of the latest request: only its answer is drawn
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

// Runs one request; shows its error, and redraws from the server's state either way. A new game or
// an undo may be sent while the agent thinks (the server stops its search): the request it supersedes
// is then neither drawn nor said.
async function act(path, body, pending) {
  const stops = path !== "move" && state && state.thinking;
  if (busy && !stops) return;
  const mine = ++requests;
  moving = path === "move"; // its answer is the agent's move
  setBusy(true);
  showError("");
  viewPly = null;
  if (pending) draw(pending, true);
  let answer = null;
  try {
    answer = await call(path, body);
  } catch (e) {
    if (mine !== requests) return;
    showError(e.message);
    try {
      answer = await call("state");
    } catch (e2) {
      // fetch throws a TypeError where nothing answers; an answer that refuses is said once
      const why = e2 instanceof TypeError ? "the server does not answer" : e2.message;
      showError(why === e.message ? e.message : `${e.message} (and ${why})`);
    }
  }
  if (mine !== requests) return;
  setBusy(false);
  if (waitShown) showError("");
  if (answer) state = answer;
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
  events.onerror = async () => {
    lostServer = true;
    if (events.readyState !== EventSource.CLOSED) {
      showError("Lost the connection to the server: trying again…");
      return;
    }
    // It tries no more: the server that answers now refused this page's token (a new server).
    try {
      await call("state"); // it answers this page: listen again
      setTimeout(listen, 2000);
    } catch (e) {
      showError(e instanceof TypeError
        ? "The server is gone: start it again, then open the address it prints."
        : "The server was started again, with a new token: open the address it printed.");
    }
  };
}
let lostServer = false;
let moving = false; // the request in flight is the person's move
let waitShown = false; // "Wait: …" is shown, until the answer the person waits for comes

function setBusy(value) {
  busy = value;
  document.body.dataset.busy = value ? "1" : "0";
}

function showError(message) {
  waitShown = message.startsWith("Wait:");
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
  if (!state) return;
  if (busy) {
    return showError(moving ? "Wait: it is the agent's turn." : "Wait: the server has not answered yet.");
  }
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

setBusy(false);
listen();
