// Golden trajectories from the authoritative JavaScript rules, for the Python twin to match.
// Reads a JSON list of scenarios {seed, opponent, actions} on stdin; writes, for each, the
// list of game snapshots after every step (the first is the state before any step).
"use strict";
const fs = require("fs");
const path = require("path");
const Rules = require(path.join(__dirname, "static", "rules.js"));
const C = JSON.parse(fs.readFileSync(path.join(__dirname, "static", "constants.json"), "utf8"));

const scenarios = JSON.parse(fs.readFileSync(0, "utf8"));
const out = scenarios.map((sc) => {
  const g = Rules.newGame(C, sc.seed, sc.opponent);
  const states = [Rules.snapshot(g)];
  for (const a of sc.actions) {
    Rules.step(C, g, a);
    states.push(Rules.snapshot(g));
    if (g.done) break;
  }
  return states;
});
process.stdout.write(JSON.stringify(out));
