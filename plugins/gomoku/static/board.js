// The play page's drawing: the board, its stones and heat, the status, the search's analysis and
// the moves. Loaded before play.js, whose state (`state`, `cells`, `board`, `$`, ...) it draws
// when called; it runs nothing as it loads.
"use strict";

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
  // While the agent thinks, a new game or an undo stops its search.
  const held = busy && !game.thinking;
  $("undo").disabled = held || !game.can_undo;
  for (const id of ["new-black", "new-white", "banner-black", "banner-white"]) $(id).disabled = held;
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
    const text = {human: "You win", agent: "The agent wins", draw: "A draw: the board is full"};
    status.textContent = `${text[s.result.winner]} (you played ${colourName(s.human)}).`;
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
  const back = game.result ? "The game is over: “Back to the game” shows how it ended."
    : "The game goes on where you left it: “Back to the game”.";
  $("review-note").textContent = s.live ? "" : back;
}
