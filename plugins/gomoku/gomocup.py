"""The Gomocup (piskvork) protocol on a text stream: a trained search agent as a Gomocup brain.

The manager writes commands a line at a time; the brain answers each on one line:

    START n          OK, or ERROR when the model was not trained for an n×n board
    RECTSTART w,h    OK for a square board of the model's size, else ERROR
    RESTART          OK (a new game on the same board)
    BEGIN            the brain's first move, x,y
    TURN x,y         the opponent's move; the brain's answer, x,y
    BOARD … DONE     a position, one `x,y,field` line per stone (1: the brain's, 2: the opponent's);
                     the brain's move. A block with more lines than the board has cells, or a bad
                     line, is answered ERROR at DONE (the lines after the first bad one are skipped,
                     not kept)
    TAKEBACK x,y     OK (the last stone is taken back; any other is ERROR)
    PLAY x,y         the brain plays x,y (the manager's choice); answers x,y
    INFO key value   no answer; timeout_turn, timeout_match and time_left (milliseconds) bound the
                     search, rule (1: exactly five) chooses the rule. A value that is not a number
                     in range (gomocup_values.INFO_RANGES: times up to 2147483647 ms, the protocol's
                     32-bit limit) is answered ERROR, and the value in force stays
    ABOUT            name="...", version="...", ...
    END              the brain exits (inside BOARD too)

Every number is written in the ASCII digits 0-9 (a coordinate `1_0` or `１０` is an ERROR, not 10).
Any other line, any bytes, is answered `ERROR ...` or `UNKNOWN ...` (a control character escaped,
`\\x00`, or shown as `?`), an empty line skipped: the brain never stops on input.

x is the column and y the row, from 0. A search stops at `search.num_simulations` or when the
time the manager allows is nearly spent, whichever comes first, with or without tree reuse; a
`MESSAGE` line after each move gives the searched position's value and the simulations run.
"""

from __future__ import annotations

import dataclasses
import time
import traceback
from collections.abc import Callable, Iterable
from typing import Any, TextIO

import numpy as np

from framework_plugins.boardgames import SearchRequest, SearchResult

from . import gomocup_values
from .brain_io import budget_s, search_until_stopped
from .gomocup_values import INFO_RANGES, TIME_KEYS, ProtocolError, number_pair, quoted, whole_number
from .kernels import WIN
from .rules import GameState, Gomoku

#: Simulations a timed search may reach before the brain has measured its rate (a search's tree
#: is sized by its simulations; later timed searches are sized by the rate measured).
FIRST_TIMED = 2048
#: The longest command line the brain reads (longer ones are answered ERROR, never read whole).
MAX_LINE = 4096
#: INFO rule bits (piskvork): exactly five, continuous game, renju, caro.
RULE_EXACT, RULE_CONTINUOUS, RULE_RENJU, RULE_CARO = 1, 2, 4, 8


class GomocupBrain:
    """The state of a Gomocup game, and the answers to the manager's commands."""

    def __init__(
        self,
        game: Gomoku,
        make_engine: Callable[[Gomoku], Any],
        *,
        num_simulations: int,
        about: dict[str, str],
        out: TextIO,
    ) -> None:
        self.trained = game
        self.game = game
        self.make_engine = make_engine
        self.engine = make_engine(game)
        self.num_simulations = num_simulations
        self.about = about
        self.out = out
        self.state: GameState | None = None
        self.info: dict[str, int] = {}
        """The INFO numbers in force (INFO_RANGES' keys)."""
        self._board: gomocup_values.BoardBlock | None = None
        self._rate: float | None = None
        """Simulations a second of the searches so far (sizes a timed search's tree)."""
        self._side: int | None = None
        self.input_gone: Callable[[], bool] = lambda: False
        """Whether the manager has gone (brain_io.ReadAhead.gone): a search under way stops."""
        """The side the brain plays in this game (0: black, 1: white), once it has moved."""

    def warm_up(self) -> None:
        """Load the search's kernels before the first command, so that no timed move pays for it."""
        self.engine.warm_up(self.game.new_state())

    # -- the loop -----------------------------------------------------------------------------------

    def serve(self, lines: Iterable[str]) -> None:
        """Answer commands until END or the end of the input (the manager is gone)."""
        for raw in lines:
            line = raw.strip()
            if not line:
                continue
            if len(line) > MAX_LINE:
                too_long = f"a line over {MAX_LINE} characters long"  # read no further than that
                if self._board is None:
                    self._say(f"ERROR {too_long}")
                elif self._board.refused is None:  # the BOARD it is part of is answered at DONE
                    self._board.refused = f"BOARD: {too_long}"
                continue
            command, _, rest = line.partition(" ")
            command = command.upper()
            if command == "END":  # also inside BOARD: the manager ends the brain whatever it was doing
                return
            try:
                if self._board is not None:
                    self._board_line(line)
                else:
                    self._command(command, rest.strip())
            except ProtocolError as e:
                self._say(f"ERROR {e}")
            except Exception as e:  # a bug: said to the manager, the trace to stderr; the brain goes on
                traceback.print_exc()
                self._say(f"ERROR {command}: {type(e).__name__}: {e}")

    def _command(self, command: str, rest: str) -> None:
        if command == "START":
            size = whole_number(rest, "START", "give START n, n the board's size (START 15)")
            self._start(size, size)
        elif command == "RECTSTART":
            form = "give RECTSTART width,height (RECTSTART 15,15)"
            width, height = number_pair(rest, "RECTSTART", ("width", "height"), form)
            self._start(width, height)
        elif command == "RESTART":
            self._require_started()
            self.state, self._side = self.game.new_state(), None
            self._say("OK")
        elif command == "INFO":
            self._info(rest)
        elif command == "ABOUT":
            self._say(", ".join(f'{key}="{value}"' for key, value in self.about.items()))
        elif command == "BEGIN":
            state = self._require_started()
            if state.moves:
                raise ProtocolError("BEGIN on a board that has stones: RESTART first")
            self._move()
        elif command == "TURN":
            state = self._require_started()
            action = self._action(rest, "TURN")
            if self._side == len(state.moves) % 2:  # its own stone was taken back: the move is its own
                raise ProtocolError(
                    f"TURN {rest.strip()}: it is this brain's move, not its opponent's (BOARD gives a "
                    "position for it to move in)"
                )
            self._play(state, action, "TURN")
            self._move()
        elif command == "PLAY":
            state = self._require_started()
            action = self._action(rest, "PLAY")
            self._play(state, action, "PLAY")
            self._say(self._xy(action))
        elif command == "TAKEBACK":
            state = self._require_started()
            action = self._action(rest, "TAKEBACK")
            if action not in state.moves:
                raise ProtocolError(f"TAKEBACK {rest}: there is no stone there")
            if action != state.moves[-1]:
                x, y = self.game.to_xy(state.moves[-1])
                raise ProtocolError(f"TAKEBACK {rest}: only the last stone ({x},{y}) can be taken back")
            self.state = GameState.from_moves(self.game, state.moves[:-1])
            self._say("OK")
        elif command == "BOARD":
            self._require_started()
            self._board = gomocup_values.BoardBlock()
        else:
            self._say(f"UNKNOWN {command}")

    # -- commands -----------------------------------------------------------------------------------

    def _start(self, width: int, height: int) -> None:
        size = self.trained.board_size
        if width != size or height != size:
            asked = f"{width}x{height}" if width != height else f"{width}x{width}"
            raise ProtocolError(
                f"this model was trained on {size}x{size} boards ({self.trained.n_in_row} in a row) and "
                f"cannot play {asked}"
            )
        self.state, self._side = self.game.new_state(), None
        self._say("OK")

    def _info(self, rest: str) -> None:
        key, _, value = rest.partition(" ")
        key, value = key.lower(), value.strip()
        if key == "evaluate":  # the manager's mouse cursor: checked, not used
            self._action(value, "INFO evaluate")
            return
        allowed = INFO_RANGES.get(key)
        if allowed is None:
            return  # folder, and any key this brain does not use: ignored, nothing kept
        # A value misread must not change (or lift) what is in force: it stays, and the manager is told.
        try:
            number = whole_number(value, f"INFO {key}", allowed.form, signed=allowed.low < 0)
        except ProtocolError as e:
            raise ProtocolError(f"{e}; {self._in_force(key)}") from None
        if not allowed.low <= number <= allowed.high:
            raise ProtocolError(
                f"INFO {key} {quoted(value)} is out of range: {allowed.form}; {self._in_force(key)}"
            )
        self.info[key] = number
        if key == "rule":
            rule = "exact" if number & RULE_EXACT else "freestyle"
            if number & (RULE_RENJU | RULE_CARO):
                self._say(f"MESSAGE renju and caro rules are not supported: playing {rule}")
            if rule != self.game.rule:
                self._set_game(dataclasses.replace(self.trained, rule=rule))

    def _in_force(self, key: str) -> str:
        """What stays of INFO `key` when a new value is refused."""
        if key == "rule":
            return f"the rule stays {self.game.rule}"
        kept = self.info.get(key)
        unit = " ms" if key in TIME_KEYS else ""
        return f"it stays {kept}{unit}" if kept is not None else "none is set"

    def _set_game(self, game: Gomoku) -> None:
        self.engine.close()
        self.game, self.engine = game, self.make_engine(game)
        if self.state is not None:
            self.state = GameState.from_moves(game, self.state.moves)

    def _board_line(self, line: str) -> None:
        """One line of a BOARD block: a stone, kept as numbers (never the line itself, so that a block
        of any length holds at most a board's worth of memory), or DONE, which answers the block."""
        block = self._board
        assert block is not None
        if line.upper() == "DONE":
            self._board = None
            if block.refused is not None:
                raise ProtocolError(block.refused)
            self.state = self._position(block.stones)
            self._move()
            return
        if block.refused is not None:
            return  # skipped until DONE
        size = self.game.board_size
        if len(block.stones) == size * size:
            block.refused = (
                f"BOARD: more than {size * size} stones, the cells of the {size}x{size} board: "
                "one x,y,field line per stone"
            )
            return
        try:
            block.stones.append(self._stone(line))
        except ProtocolError as e:
            block.refused = str(e)

    def _stone(self, line: str) -> tuple[int, int]:
        """(action, field) of a BOARD line `x,y,field` (field 1: the brain's stone, 2: the opponent's)."""
        parts = line.split(",")
        if len(parts) != 3:
            raise ProtocolError(f"BOARD: {quoted(line)} is not x,y,field (7,7,1)")
        action = self._action(",".join(parts[:2]), "BOARD")
        field = parts[2].strip(" \t")
        if field not in ("1", "2"):
            raise ProtocolError(
                f"BOARD: field {quoted(field)} in {quoted(line)} (1: own stone, 2: opponent's)"
            )
        return action, int(field)

    def _position(self, stones: list[tuple[int, int]]) -> GameState:
        """The position a BOARD command gives, with the brain to move (its stones are field 1)."""
        own = [action for action, field in stones if field == 1]
        theirs = [action for action, field in stones if field == 2]
        if len(set(own + theirs)) != len(own) + len(theirs):
            raise ProtocolError("BOARD: a cell is given twice")
        if len(own) == len(theirs):
            black, white = own, theirs
        elif len(theirs) == len(own) + 1:
            black, white = theirs, own
        else:
            raise ProtocolError(
                f"BOARD: {len(own)} own stones and {len(theirs)} of the opponent's: the brain to move has "
                "as many stones as its opponent, or one fewer"
            )
        moves: list[int] = []  # alternating, each side's stones in the order given
        for i, stone in enumerate(black):
            moves += [stone, *white[i : i + 1]]
        try:
            state = GameState.from_moves(self.game, moves)
        except ValueError:
            state = None
        if state is None or state.done:
            raise ProtocolError("BOARD: the game is over in that position (a winning line, or a full board)")
        return state

    # -- moves --------------------------------------------------------------------------------------

    def _play(self, state: GameState, action: int, command: str) -> None:
        if state.done:
            raise ProtocolError(f"{command}: the game is over")
        if not state.legal[action]:
            x, y = self.game.to_xy(action)
            raise ProtocolError(f"{command} {x},{y}: that cell is taken")
        state.play(action)

    def _move(self) -> None:
        """Search the position, play the most visited move and answer it."""
        state = self.state
        assert state is not None
        if state.done:
            raise ProtocolError("the game is over")
        found, seconds = self._search(state)
        counts, simulations = found.visits[0], found.simulations
        legal = np.flatnonzero(state.legal)
        chosen = int(found.chosen_moves[0])
        action = chosen if chosen >= 0 else int(legal[np.argmax(counts[legal])])
        value = float(found.values[0])
        self._side = len(state.moves) % 2  # the side it plays: 0 black, 1 white
        outcome = state.play(action)
        self._say(
            f"MESSAGE value {value:+.3f} simulations {simulations} in {seconds:.2f} s"
            + (" (a winning move)" if outcome == WIN else "")
        )
        self._say(self._xy(action))

    def _search(self, state: GameState) -> tuple[SearchResult, float]:
        """The search's result (its simulations: every search's for this move) and the seconds it took."""
        engine = self.engine
        started = time.perf_counter()
        budget = budget_s(self.info)
        deadline = None if budget is None else started + budget
        sized_blind = budget is not None and self._rate is None
        ran = 0
        while True:
            target = self.num_simulations
            if budget is not None:  # a tree as large as the time allows, not as num_simulations asks
                expected = FIRST_TIMED if self._rate is None else int(4 * self._rate * budget) + FIRST_TIMED
                target = max(1, min(target, expected))
            begun = time.perf_counter()
            request = SearchRequest(simulations=target, deadline=deadline)
            found = search_until_stopped(engine, [state], request, self.input_gone)
            seconds = time.perf_counter() - begun
            simulations = found.simulations
            ran += simulations
            decided = abs(float(found.values[0])) > 0.99
            if seconds > 0.01 and simulations > 0 and not decided:  # a won position's search runs fast
                # The fastest rate seen (each new one at most 4x the last): a search slowed by a busy
                # machine must not shrink the next tree, or that search ends early at its size.
                rate = simulations / seconds
                self._rate = rate if self._rate is None else max(self._rate, min(rate, 4 * self._rate))
            # The first timed search, sized before any rate was known, that used little of its time:
            # once more, sized by the rate it measured, in the time left.
            again = sized_blind and self._rate is not None
            sized_blind = False
            late = budget is None or started + budget / 2 < time.perf_counter()
            if not again or late or self.input_gone():
                # the second search went on in the first one's tree: its own simulations are not all
                return dataclasses.replace(found, simulations=ran), time.perf_counter() - started

    # -- helpers ------------------------------------------------------------------------------------

    def _require_started(self) -> GameState:
        if self.state is None:
            raise ProtocolError("no game: START n first")
        return self.state

    def _action(self, text: str, command: str) -> int:
        size = self.game.board_size
        valid = f"x and y from 0 to {size - 1}"
        x, y = number_pair(
            text, command, ("x", "y"), f"give x,y with {valid} ({command} {size // 2},{size // 2})"
        )
        if not (0 <= x < size and 0 <= y < size):
            raise ProtocolError(f"{command} {x},{y} is off the {size}x{size} board ({valid})")
        return self.game.from_xy(x, y)

    def _xy(self, action: int) -> str:
        x, y = self.game.to_xy(action)
        return f"{x},{y}"

    def _say(self, line: str) -> None:
        # What the brain echoes of its input (an unknown command, a bad value) gets no control
        # characters through: a carriage return or an escape would garble the manager's log.
        line = "".join(c if c.isprintable() else "?" for c in line)
        self.out.write(line + "\n")
        self.out.flush()
