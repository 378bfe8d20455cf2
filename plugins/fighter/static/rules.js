/*
 * The fighter game's rules: the authoritative implementation, run by the browser page and,
 * for golden trajectories, by Node. framework_plugins/fighter/rules.py is its Python twin and
 * must stay identical (tests/fighter compare both frame by frame). Integers only, so that
 * both languages compute bit-identical states; constants come from constants.json.
 */
(function (root, factory) {
  if (typeof module === "object" && module.exports) {
    module.exports = factory();
  } else {
    root.FighterRules = factory();
  }
})(typeof self !== "undefined" ? self : this, function () {
  "use strict";

  const S = { IDLE: 0, WALK: 1, JUMP: 2, CROUCH: 3, BLOCK: 4, PUNCH: 5, KICK: 6, SPECIAL: 7, HITSTUN: 8, KO: 9 };
  const A = { NOOP: 0, LEFT: 1, RIGHT: 2, JUMP: 3, CROUCH: 4, BLOCK: 5, PUNCH: 6, KICK: 7, SPECIAL: 8 };
  const ATTACKS = ["punch", "kick", "special"]; // states PUNCH..SPECIAL, actions PUNCH..SPECIAL

  function attackOf(state) {
    return state >= S.PUNCH && state <= S.SPECIAL ? ATTACKS[state - S.PUNCH] : null;
  }

  function seedRng(seed) {
    const s = ((seed >>> 0) ^ 0x9e3779b9) >>> 0;
    return s === 0 ? 0x6d2b79f5 : s;
  }

  function rngNext(g) {
    let x = g.rng;
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    g.rng = x >>> 0;
    return g.rng;
  }

  function newFighter(C, x, facing) {
    return { x: x, y: 0, vx: 0, vy: 0, hp: C.max_hp, facing: facing, state: S.IDLE, timer: 0, elapsed: 0, hit: 0, cooldown: 0 };
  }

  function newGame(C, seed, opponent) {
    if (C.opponents.indexOf(opponent) < 0) {
      throw new Error("unknown opponent " + JSON.stringify(opponent) + "; valid: " + C.opponents.join(", "));
    }
    return {
      frame: 0,
      rng: seedRng(seed),
      opponent: opponent,
      fighters: [newFighter(C, C.start_x[0], 1), newFighter(C, C.start_x[1], -1)],
      done: false,
      winner: -1,
      hold: 0,
      held: 0,
      dealt: [0, 0],
    };
  }

  function actionable(f) {
    return (f.state === S.IDLE || f.state === S.WALK || f.state === S.CROUCH || f.state === S.BLOCK) && f.timer === 0;
  }

  function applyInput(C, f, a) {
    if (!actionable(f)) return;
    if (a === A.LEFT || a === A.RIGHT) {
      f.state = S.WALK;
      f.vx = (a === A.LEFT ? -1 : 1) * C.walk_speed;
    } else if (a === A.JUMP) {
      if (f.state !== S.WALK) f.vx = 0; // a walking jump carries its speed
      f.state = S.JUMP;
      f.vy = C.jump_velocity;
    } else if (a === A.CROUCH) {
      f.state = S.CROUCH;
      f.vx = 0;
    } else if (a === A.BLOCK) {
      f.state = S.BLOCK;
      f.vx = 0;
    } else if (a >= A.PUNCH && a <= A.SPECIAL) {
      const k = C.attacks[ATTACKS[a - A.PUNCH]];
      f.vx = 0;
      if (k.cooldown > 0 && f.cooldown > 0) {
        f.state = S.IDLE; // still cooling down: nothing happens
        return;
      }
      f.state = S.PUNCH + (a - A.PUNCH);
      f.timer = k.startup + k.active + k.recovery;
      f.elapsed = 0;
      f.hit = 0;
      if (k.cooldown > 0) f.cooldown = k.cooldown;
    } else {
      f.state = S.IDLE;
      f.vx = 0;
    }
  }

  function clamp(v, lo, hi) {
    return v < lo ? lo : v > hi ? hi : v;
  }

  function move(C, f) {
    f.x += f.vx;
    if (f.state === S.HITSTUN || f.state === S.KO || f.state === S.BLOCK) {
      if (f.vx > 0) f.vx -= 1;
      else if (f.vx < 0) f.vx += 1;
    }
    if (f.state === S.JUMP || f.y > 0) {
      f.y += f.vy;
      f.vy -= C.gravity;
      if (f.y <= 0) {
        f.y = 0;
        f.vy = 0;
        if (f.state === S.JUMP) {
          f.state = S.IDLE;
          f.vx = 0;
        }
      }
    }
    const half = Math.floor(C.fighter_width / 2);
    f.x = clamp(f.x, half, C.stage_width - half);
  }

  function separate(C, fs) {
    const a = fs[0];
    const b = fs[1];
    const w = C.fighter_width;
    const half = Math.floor(w / 2);
    const gap = Math.abs(b.x - a.x);
    if (gap >= w) return;
    const left = b.x >= a.x ? a : b; // on a tie, fighter 0 goes left
    const right = left === a ? b : a;
    const overlap = w - gap;
    const push = Math.floor(overlap / 2);
    left.x = clamp(left.x - push, half, C.stage_width - half);
    right.x = clamp(right.x + (overlap - push), half, C.stage_width - half);
    if (right.x - left.x < w) {
      if (left.x === half) right.x = left.x + w;
      else left.x = right.x - w;
    }
  }

  function face(f, other) {
    if (f.state <= S.BLOCK) {
      if (other.x > f.x) f.facing = 1;
      else if (other.x < f.x) f.facing = -1;
    }
  }

  function checkHit(C, att, def) {
    const name = attackOf(att.state);
    if (name === null || att.hit === 1 || def.state === S.KO) return null;
    const k = C.attacks[name];
    if (att.elapsed < k.startup || att.elapsed >= k.startup + k.active) return null;
    const dist = (def.x - att.x) * att.facing;
    if (dist <= 0 || dist > k.reach) return null;
    if (k.high && def.state === S.CROUCH) return null;
    if (k.low && def.y > C.low_attack_max_y) return null;
    return name;
  }

  function applyHit(C, g, i, name) {
    const att = g.fighters[i];
    const def = g.fighters[1 - i];
    const k = C.attacks[name];
    att.hit = 1;
    const blocked = def.state === S.BLOCK && def.facing === -att.facing;
    const damage = Math.min(def.hp, blocked ? k.chip : k.damage);
    def.hp -= damage;
    g.dealt[i] += damage;
    if (blocked) {
      def.timer = k.blockstun;
      def.vx = att.facing * Math.floor(k.knockback / 2);
    } else {
      def.state = S.HITSTUN;
      def.timer = k.hitstun;
      def.vx = att.facing * k.knockback;
      def.elapsed = 0;
      def.hit = 0;
    }
    if (def.hp === 0) {
      def.state = S.KO;
      def.timer = 0;
    }
  }

  function tick(f) {
    if (f.cooldown > 0) f.cooldown -= 1;
    if (attackOf(f.state) !== null) f.elapsed += 1;
    if (f.timer > 0) {
      f.timer -= 1;
      if (f.timer === 0 && f.state !== S.BLOCK) {
        f.state = S.IDLE;
        f.elapsed = 0;
        f.hit = 0;
      }
    }
  }

  function finish(C, g) {
    const a = g.fighters[0];
    const b = g.fighters[1];
    if (a.hp === 0 || b.hp === 0 || g.frame >= C.round_frames) {
      g.done = true;
      g.winner = a.hp > b.hp ? 0 : b.hp > a.hp ? 1 : -1;
    }
  }

  function stepFrame(C, g, actions) {
    if (g.done) return;
    const fs = g.fighters;
    applyInput(C, fs[0], actions[0]);
    applyInput(C, fs[1], actions[1]);
    move(C, fs[0]);
    move(C, fs[1]);
    separate(C, fs);
    face(fs[0], fs[1]);
    face(fs[1], fs[0]);
    const hits = [checkHit(C, fs[0], fs[1]), checkHit(C, fs[1], fs[0])]; // simultaneous: trades happen
    if (hits[0] !== null) applyHit(C, g, 0, hits[0]);
    if (hits[1] !== null) applyHit(C, g, 1, hits[1]);
    tick(fs[0]);
    tick(fs[1]);
    g.frame += 1;
    finish(C, g);
  }

  function chance(g, perMille) {
    return rngNext(g) % 1000 < perMille;
  }

  // Play `action` now and for frames - 1 more frames: a scripted opponent's decision is held
  // (its reaction time), so it acts on what it saw a few frames ago.
  function commit(g, action, frames) {
    g.hold = action;
    g.held = frames - 1;
    return action;
  }

  function opponentAction(C, g) {
    if (g.opponent === "idle") return A.NOOP;
    if (g.held > 0) {
      g.held -= 1; // a decision still held
      return g.hold;
    }
    if (g.opponent === "random") return commit(g, rngNext(g) % C.actions.length, C.random_hold_frames);
    if (g.opponent === "aggressive") return aggressive(C, g);
    return defensive(C, g);
  }

  // Presses forward: from afar it walks in with a random reaction time and the odd hesitation;
  // within reach it mostly opens with the special (else waits behind its guard), then punches and
  // kicks, now and then backing off.
  function aggressive(C, g) {
    const P = C.scripted;
    const reach = C.attacks;
    const me = g.fighters[1];
    const foe = g.fighters[0];
    const dist = Math.abs(foe.x - me.x);
    const toward = foe.x > me.x ? A.RIGHT : A.LEFT;
    const away = toward === A.RIGHT ? A.LEFT : A.RIGHT;
    // A held walk ends before either fighter, both walking, could have closed into special reach.
    if (dist > reach.special.reach + 2 * C.walk_speed * P.reaction_frames) {
      if (chance(g, P.hesitate_chance)) return commit(g, A.NOOP, 2 + (rngNext(g) % (P.hesitate_frames - 1)));
      return commit(g, toward, 1 + (rngNext(g) % P.reaction_frames));
    }
    if (dist <= reach.kick.reach && chance(g, P.retreat_chance)) {
      return commit(g, away, 2 + (rngNext(g) % (P.retreat_frames - 1)));
    }
    if (me.cooldown === 0 && dist > reach.kick.reach && dist <= reach.special.reach) {
      if (chance(g, P.special_chance)) return commit(g, A.SPECIAL, 1);
      return commit(g, A.BLOCK, 1 + (rngNext(g) % P.reaction_frames));
    }
    if (dist <= reach.punch.reach) return commit(g, rngNext(g) % 2 === 0 ? A.PUNCH : A.KICK, 1);
    if (dist <= reach.kick.reach) return commit(g, A.KICK, 1);
    return commit(g, toward, 1); // near a special's reach it steps in frame by frame
  }

  // Blocks what is coming (usually at once), counters up close, otherwise keeps its distance,
  // now and then stepping in; its moves are held for a random reaction time.
  function defensive(C, g) {
    const P = C.scripted;
    const reach = C.attacks;
    const me = g.fighters[1];
    const foe = g.fighters[0];
    const dist = Math.abs(foe.x - me.x);
    const toward = foe.x > me.x ? A.RIGHT : A.LEFT;
    const away = toward === A.RIGHT ? A.LEFT : A.RIGHT;
    const threat = attackOf(foe.state);
    if (threat !== null && dist <= reach[threat].reach + P.threat_margin) {
      if (me.state === S.BLOCK || chance(g, P.block_chance)) return commit(g, A.BLOCK, 1);
      return commit(g, A.NOOP, 1); // too slow this frame
    }
    if (dist <= reach.punch.reach) return commit(g, A.PUNCH, 1);
    if (chance(g, P.approach_chance)) return commit(g, toward, 2 + (rngNext(g) % (P.approach_frames - 1)));
    const react = 1 + (rngNext(g) % P.reaction_frames);
    return commit(g, dist < P.keep_distance ? away : A.NOOP, react);
  }

  function step(C, g, action) {
    g.dealt = [0, 0];
    for (let k = 0; k < C.frames_per_step && !g.done; k++) {
      stepFrame(C, g, [action, opponentAction(C, g)]);
    }
  }

  function snapshot(g) {
    return JSON.parse(JSON.stringify(g));
  }

  return { S: S, A: A, newGame: newGame, step: step, stepFrame: stepFrame, opponentAction: opponentAction, snapshot: snapshot };
});
