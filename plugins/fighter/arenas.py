"""The game side of the protocol, in Python: n arenas of the twin answering reset and step."""

from __future__ import annotations

from typing import Any

from . import rules
from .protocol import ProtocolError, pack_game


class Arenas:
    """What the browser page does, done by the Python twin: one game per arena."""

    def __init__(self, constants: dict[str, Any] | None = None) -> None:
        self.C = constants or rules.load_constants()
        self.games: list[rules.Game] = []
        self.episode = -1
        self.step_id = 0

    def result(self) -> dict[str, Any]:
        """The result message for the current state of every arena."""
        games = [pack_game(g) for g in self.games]
        return {"type": "result", "episode": self.episode, "step": self.step_id, "games": games}

    def handle(self, message: dict[str, Any]) -> list[rules.Game]:
        """Apply a checked reset or step message; returns every arena's game."""
        if message["type"] == "reset":
            fresh = [rules.new_game(self.C, seed, message["opponent"]) for seed in message["seeds"]]
            which = message.get("arenas")
            if which is None:
                self.games = fresh
            else:
                if len(which) != len(fresh) or not all(0 <= i < len(self.games) for i in which):
                    n = len(self.games)
                    raise ProtocolError(f"cannot restart arenas {which} of {n} with {len(fresh)} seeds")
                for i, game in zip(which, fresh, strict=True):
                    self.games[i] = game
            self.episode, self.step_id = message["episode"], 0
        elif message["type"] == "step":
            actions = message["actions"]
            if message["episode"] != self.episode:
                raise ProtocolError(
                    f"step for episode {message['episode']}, but episode {self.episode} is running"
                )
            if len(actions) != len(self.games):
                raise ProtocolError(f"{len(actions)} actions for {len(self.games)} arenas")
            n_actions = len(self.C["actions"])
            for game, action in zip(self.games, actions, strict=True):
                if not 0 <= action < n_actions:
                    raise ProtocolError(f"action {action} is not in 0..{n_actions - 1}")
                if not game["done"]:
                    rules.step(self.C, game, action)
            self.step_id = message["step"]
        else:
            raise ProtocolError(f"arenas cannot handle {message['type']!r} messages")
        return self.games
