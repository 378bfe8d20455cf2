/*
 * Drawing one arena: a stage, two fighters posed by their state, health bars, the timer, hit
 * sparks and the round's result. Pure drawing on a 2D context; plugins/fighter/drawing.py draws
 * the same poses for the replay videos.
 */
(function () {
  "use strict";
  const AGENT = "#4fb0ff";
  const OPPONENT = "#ff6b5a";
  const STATES = ["idle", "walk", "jump", "crouch", "block", "punch", "kick", "special", "hitstun", "ko"];

  // A pose: joints in a fighter's own frame (x toward the opponent, y up from the feet), in
  // hundredths of the fighter's height. `t` in 0..1 is how far into an attack or stun it is.
  function pose(state, t, walk) {
    const swing = Math.sin(walk) * 12;
    const p = {
      hip: [0, 50], neck: [0, 84], head: [0, 93],
      knee: [[-5, 26], [6, 26]], foot: [[-11, 0], [11, 0]],
      elbow: [[10, 70], [-5, 68]], hand: [[17, 80], [6, 80]],
    };
    switch (state) {
      case "walk":
        p.knee = [[-4 + swing / 2, 26], [4 - swing / 2, 26]];
        p.foot = [[-6 + swing, 0], [6 - swing, 0]];
        break;
      case "jump":
        p.knee = [[4, 32], [14, 30]]; p.foot = [[-8, 14], [6, 12]];
        p.elbow = [[10, 90], [-8, 88]]; p.hand = [[14, 104], [-6, 102]];
        break;
      case "crouch":
        p.hip = [0, 28]; p.neck = [6, 58]; p.head = [9, 67];
        p.knee = [[14, 22], [-4, 18]]; p.foot = [[-14, 0], [16, 0]];
        p.elbow = [[16, 48], [4, 46]]; p.hand = [[22, 58], [12, 56]];
        break;
      case "block":
        p.elbow = [[12, 72], [10, 66]]; p.hand = [[16, 92], [15, 80]];
        p.neck = [-3, 84]; p.head = [-4, 93];
        break;
      case "punch": {
        const reach = t < 0.3 ? 6 : t < 0.55 ? 42 : 20;
        p.elbow = [[8 + reach / 2, 78], [-5, 68]]; p.hand = [[12 + reach, 82], [6, 80]];
        p.neck = [4, 84]; p.head = [5, 93];
        break;
      }
      case "kick": {
        const out = t < 0.3 ? 0.3 : t < 0.55 ? 1 : 0.4;
        p.knee = [[-6, 26], [10 + 18 * out, 30 + 14 * out]];
        p.foot = [[-12, 0], [14 + 36 * out, 24 + 22 * out]];
        p.neck = [-8, 82]; p.head = [-11, 91];
        p.elbow = [[2, 70], [-14, 68]]; p.hand = [[10, 78], [-20, 76]];
        break;
      }
      case "special": {
        const out = t < 0.3 ? 0.2 : t < 0.6 ? 1 : 0.5;
        p.elbow = [[14 + 10 * out, 76], [12 + 10 * out, 72]];
        p.hand = [[20 + 26 * out, 80], [18 + 26 * out, 76]];
        p.knee = [[-8, 24], [12, 26]]; p.foot = [[-18, 0], [16, 0]];
        break;
      }
      case "hitstun":
        p.neck = [-12, 80]; p.head = [-18, 87];
        p.elbow = [[-4, 86], [-22, 76]]; p.hand = [[4, 98], [-32, 86]];
        p.knee = [[-2, 26], [8, 24]];
        break;
      case "ko":
        p.hip = [-30, 6]; p.neck = [-64, 6]; p.head = [-74, 7];
        p.knee = [[-6, 10], [-10, 4]]; p.foot = [[8, 0], [12, 0]];
        p.elbow = [[-50, 14], [-46, 2]]; p.hand = [[-38, 20], [-34, 0]];
        break;
      default:
        break;
    }
    return p;
  }

  function attackFraction(C, f) {
    const name = ["punch", "kick", "special"][f.state - 5];
    if (name) {
      const k = C.attacks[name];
      return f.elapsed / (k.startup + k.active + k.recovery);
    }
    return f.state === 8 ? 1 - f.timer / 24 : 0;
  }

  function drawFighter(ctx, C, f, color, view, fx) {
    const state = STATES[f.state] || "idle";
    const p = pose(state, attackFraction(C, f), f.x / 9);
    const H = view.fighterHeight;
    const ox = view.left + f.x * view.scale;
    const oy = view.floor - f.y * view.scale;
    // Knocked out against a wall, a fighter falls away from it: the canvas ends there.
    const fallsAt = ox - (f.facing * 0.8 * H);
    const facing = state === "ko" && (fallsAt < 0 || fallsAt > view.width) ? -f.facing : f.facing;
    const X = (pt) => ox + (facing * pt[0] * H) / 100;
    const Y = (pt) => oy - (pt[1] * H) / 100;
    const lw = Math.max(2, H * 0.075);
    ctx.save();
    // Shadow on the floor, smaller the higher the fighter is.
    ctx.fillStyle = "#0006";
    const shadow = Math.max(0.3, 1 - f.y / 300);
    ctx.beginPath();
    ctx.ellipse(ox, view.floor + 3, H * 0.22 * shadow, H * 0.04 * shadow, 0, 0, Math.PI * 2);
    ctx.fill();
    const flash = fx.flash > 0;
    ctx.strokeStyle = flash ? "#fff" : color;
    ctx.fillStyle = flash ? "#fff" : color;
    ctx.lineCap = "round";
    ctx.lineJoin = "round";
    ctx.lineWidth = lw;
    const limb = (a, b, c) => {
      ctx.beginPath();
      ctx.moveTo(X(a), Y(a));
      ctx.lineTo(X(b), Y(b));
      ctx.lineTo(X(c), Y(c));
      ctx.stroke();
    };
    limb(p.hip, p.knee[0], p.foot[0]);
    limb(p.hip, p.knee[1], p.foot[1]);
    ctx.lineWidth = lw * 1.5;
    ctx.beginPath();
    ctx.moveTo(X(p.hip), Y(p.hip));
    ctx.lineTo(X(p.neck), Y(p.neck));
    ctx.stroke();
    ctx.lineWidth = lw;
    limb(p.neck, p.elbow[0], p.hand[0]);
    limb(p.neck, p.elbow[1], p.hand[1]);
    ctx.beginPath();
    ctx.arc(X(p.head), Y(p.head), H * 0.085, 0, Math.PI * 2);
    ctx.fill();
    // Fists, and the special move's energy.
    ctx.beginPath();
    ctx.arc(X(p.hand[0]), Y(p.hand[0]), lw * 0.8, 0, Math.PI * 2);
    ctx.fill();
    if (state === "special") {
      const glow = ctx.createRadialGradient(X(p.hand[0]), Y(p.hand[0]), 1, X(p.hand[0]), Y(p.hand[0]), H * 0.2);
      glow.addColorStop(0, "#fffbe0");
      glow.addColorStop(0.4, "#ff5af0aa");
      glow.addColorStop(1, "#ff5af000");
      ctx.fillStyle = glow;
      ctx.beginPath();
      ctx.arc(X(p.hand[0]), Y(p.hand[0]), H * 0.2, 0, Math.PI * 2);
      ctx.fill();
    }
    if (state === "block") {
      ctx.strokeStyle = "#9fe8ff";
      ctx.lineWidth = Math.max(1.5, lw * 0.5);
      ctx.beginPath();
      ctx.arc(X([6, 70]), Y([6, 70]), H * 0.32, -0.9, 0.9);
      ctx.stroke();
    }
    ctx.restore();
    return { hand: [X(p.hand[0]), Y(p.hand[0])], head: [X(p.head), Y(p.head)], foot: [X(p.foot[1]), Y(p.foot[1])] };
  }

  function spark(ctx, x, y, r, t) {
    ctx.save();
    ctx.translate(x, y);
    ctx.rotate(t * 0.7);
    ctx.fillStyle = "#fff6b0";
    ctx.strokeStyle = "#ffb030";
    ctx.lineWidth = 2;
    ctx.beginPath();
    for (let i = 0; i < 16; i++) {
      const rr = i % 2 === 0 ? r : r * 0.4;
      const a = (i * Math.PI) / 8;
      ctx.lineTo(Math.cos(a) * rr, Math.sin(a) * rr);
    }
    ctx.closePath();
    ctx.fill();
    ctx.stroke();
    ctx.restore();
  }

  function stage(ctx, w, h, floor) {
    const sky = ctx.createLinearGradient(0, 0, 0, floor);
    sky.addColorStop(0, "#1a2350");
    sky.addColorStop(1, "#4a3a6a");
    ctx.fillStyle = sky;
    ctx.fillRect(0, 0, w, floor);
    // Distant hills, then the floor with its boards.
    ctx.fillStyle = "#2a2548";
    ctx.beginPath();
    ctx.moveTo(0, floor);
    for (let i = 0; i <= 8; i++) ctx.lineTo((i * w) / 8, floor - h * (0.12 + 0.07 * Math.sin(i * 1.7)));
    ctx.lineTo(w, floor);
    ctx.fill();
    const ground = ctx.createLinearGradient(0, floor, 0, h);
    ground.addColorStop(0, "#6b5440");
    ground.addColorStop(1, "#3b2c22");
    ctx.fillStyle = ground;
    ctx.fillRect(0, floor, w, h - floor);
    ctx.strokeStyle = "#0003";
    ctx.lineWidth = 1;
    for (let i = 1; i < 10; i++) {
      ctx.beginPath();
      ctx.moveTo((i * w) / 10, floor);
      ctx.lineTo(w / 2 + ((i - 5) * w) / 6, h);
      ctx.stroke();
    }
  }

  function healthBar(ctx, x, y, w, h, hp, max, color, right, name) {
    ctx.fillStyle = "#000a";
    ctx.fillRect(x - 2, y - 2, w + 4, h + 4);
    ctx.fillStyle = "#5a1c22";
    ctx.fillRect(x, y, w, h);
    const fill = (w * hp) / max;
    ctx.fillStyle = hp / max > 0.3 ? "#5adc6e" : "#ffb030";
    ctx.fillRect(right ? x + w - fill : x, y, fill, h);
    ctx.font = `bold ${Math.round(h * 0.8)}px system-ui`;
    ctx.textBaseline = "middle";
    ctx.fillStyle = "#fff";
    ctx.textAlign = right ? "right" : "left";
    ctx.fillText(`${hp}`, right ? x + w - 4 : x + 4, y + h / 2 + 1);
    ctx.fillStyle = color;
    ctx.font = `bold ${Math.round(h * 0.85)}px system-ui`;
    ctx.textAlign = right ? "right" : "left";
    ctx.fillText(name, right ? x + w : x, y + h * 1.9);
  }

  /**
   * Draw game `g` on `ctx` (`w` x `h` CSS pixels). `fx` keeps each fighter's hit flash between
   * frames ({flash: [0, 0], sparks: [], frame: -1}); `labels` = [agent's name, opponent's name].
   */
  function drawArena(ctx, w, h, C, g, fx, labels) {
    const floor = h * 0.84;
    const fighterHeight = h * 0.36;
    // The stage's walls stand a margin in from the canvas's edges, so that a fighter against one
    // is drawn whole, reach and label included.
    const margin = Math.min(w * 0.1, fighterHeight * 0.35);
    const view = {
      left: margin, width: w, scale: (w - 2 * margin) / C.stage_width, floor: floor, fighterHeight: fighterHeight,
    };
    stage(ctx, w, h, floor);
    const colors = [AGENT, OPPONENT];
    const points = g.fighters.map((f, i) => drawFighter(ctx, C, f, colors[i], view, { flash: fx.flash[i] }));
    // A hit landed in a step not drawn before: a spark where the blow met, the one hit flashes.
    const fresh = fx.frame !== g.frame;
    fx.frame = g.frame;
    (g.dealt || [0, 0]).forEach((d, i) => {
      if (d > 0 && fresh) {
        const hitter = g.fighters[i];
        const at = hitter.state === 6 ? points[i].foot : points[i].hand;
        fx.sparks.push({ x: at[0], y: at[1], left: 6, size: h * (0.04 + d / 250) });
        fx.flash[1 - i] = 4;
      }
    });
    fx.sparks = fx.sparks.filter((s) => s.left > 0);
    fx.sparks.forEach((s) => {
      spark(ctx, s.x, s.y, s.size, s.left);
      s.left -= 1;
    });
    fx.flash = fx.flash.map((v) => Math.max(0, v - 1));
    // Labels over the heads, health bars and the timer.
    ctx.textAlign = "center";
    ctx.textBaseline = "alphabetic";
    ctx.font = `bold ${Math.max(10, Math.round(h * 0.045))}px system-ui`;
    // Each label inside the canvas; where the two would touch, the opponent's goes above.
    const names = ["AGENT", labels[1].toUpperCase()];
    const half = names.map((n) => ctx.measureText(n).width / 2);
    const xs = points.map((p, i) => Math.min(Math.max(p.head[0], half[i] + 2), w - half[i] - 2));
    const close = Math.abs(xs[0] - xs[1]) < half[0] + half[1] + 6;
    names.forEach((name, i) => {
      ctx.fillStyle = colors[i];
      const lift = h * (close && i === 1 ? 0.12 : 0.06);
      ctx.fillText(name, xs[i], points[i].head[1] - lift);
    });
    const barW = w * 0.38;
    const barH = Math.max(8, h * 0.045);
    healthBar(ctx, w * 0.03, h * 0.04, barW, barH, g.fighters[0].hp, C.max_hp, AGENT, false, labels[0]);
    healthBar(ctx, w * 0.97 - barW, h * 0.04, barW, barH, g.fighters[1].hp, C.max_hp, OPPONENT, true, labels[1]);
    const left = Math.max(0, Math.ceil((C.round_frames - g.frame) / 60));
    ctx.fillStyle = "#fff";
    ctx.textAlign = "center";
    ctx.font = `bold ${Math.round(barH * 1.6)}px system-ui`;
    ctx.fillText(String(left), w / 2, h * 0.04 + barH * 1.3);
    if (g.done) {
      const text = g.winner === 0 ? "AGENT WINS" : g.winner === 1 ? "OPPONENT WINS" : "DRAW";
      ctx.fillStyle = "#000a";
      ctx.fillRect(0, h * 0.38, w, h * 0.16);
      ctx.fillStyle = g.winner === 0 ? AGENT : g.winner === 1 ? OPPONENT : "#ddd";
      ctx.font = `900 ${Math.round(h * 0.11)}px system-ui`;
      ctx.fillText(text, w / 2, h * 0.5);
    }
  }

  // The header's words: the trainer's phase, and how the run ended (protocol.ENDINGS: the phase
  // pill's text, and the banner's).
  const PHASE_TEXT = {
    starting: "starting",
    training: "training",
    updating: "updating the policy",
    evaluating: "evaluating",
    waiting: "waiting for the trainer",
    inactive: "inactive: another page trains",
    gone: "the trainer is gone",
  };
  const ENDED = {
    finished: ["run finished", "The run has ended: training finished. The trainer's output says where its results are."],
    stopped: ["run stopped", "The run has ended: it was stopped (Ctrl-C, SIGTERM or a sweep's pruner). The trainer's output says what it saved."],
    failed: ["run failed", "The run has ended: it failed. The trainer's output says why."],
    ended: ["run ended", "The run has ended: the trainer closed the game."],
  };

  window.FighterDraw = { drawArena: drawArena, pose: pose, STATES: STATES, PHASE_TEXT: PHASE_TEXT, ENDED: ENDED };
})();
