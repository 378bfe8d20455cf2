"""The fighter game drawn as the page draws it (static/draw.js), in numpy, for replay videos:
a stage, two fighters posed by their state, health bars and the round's timer."""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from .rules import ATTACK_OF_STATE, S

RGB = tuple[int, int, int]
SKY_TOP: RGB = (26, 35, 80)
SKY_LOW: RGB = (74, 58, 106)
HILLS: RGB = (42, 37, 72)
FLOOR_TOP: RGB = (107, 84, 64)
FLOOR_LOW: RGB = (59, 44, 34)
COLORS: tuple[RGB, RGB] = ((79, 176, 255), (255, 107, 90))
HP: RGB = (90, 220, 110)
HP_LOW: RGB = (255, 176, 48)
HP_LOST: RGB = (90, 28, 34)
SPARK: RGB = (255, 246, 176)
WHITE: RGB = (255, 255, 255)

Point = tuple[float, float]
#: Joints of each state's pose in a fighter's own frame (x toward the opponent, y up from its
#: feet), in hundredths of its height: hip, neck, head, (back, front) knees, feet, elbows, hands.
POSES: dict[int, dict[str, Any]] = {}


def _pose(**changes: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "hip": (0, 50), "neck": (0, 84), "head": (0, 93),
        "knee": ((-5, 26), (6, 26)), "foot": ((-11, 0), (11, 0)),
        "elbow": ((10, 70), (-5, 68)), "hand": ((17, 80), (6, 80)),
    }  # fmt: skip
    return {**base, **changes}


POSES[S.IDLE] = _pose()
POSES[S.WALK] = _pose(knee=((-1, 26), (1, 26)), foot=((-14, 0), (14, 0)))
POSES[S.JUMP] = _pose(knee=((4, 32), (14, 30)), foot=((-8, 14), (6, 12)), elbow=((10, 90), (-8, 88)),
                      hand=((14, 104), (-6, 102)))  # fmt: skip
POSES[S.CROUCH] = _pose(hip=(0, 28), neck=(6, 58), head=(9, 67), knee=((14, 22), (-4, 18)),
                        foot=((-14, 0), (16, 0)), elbow=((16, 48), (4, 46)),
                        hand=((22, 58), (12, 56)))  # fmt: skip
POSES[S.BLOCK] = _pose(neck=(-3, 84), head=(-4, 93), elbow=((12, 72), (10, 66)), hand=((16, 92), (15, 80)))
POSES[S.PUNCH] = _pose(neck=(4, 84), head=(5, 93), elbow=((29, 78), (-5, 68)), hand=((54, 82), (6, 80)))
POSES[S.KICK] = _pose(neck=(-8, 82), head=(-11, 91), knee=((-6, 26), (28, 44)), foot=((-12, 0), (50, 46)),
                      elbow=((2, 70), (-14, 68)), hand=((10, 78), (-20, 76)))  # fmt: skip
POSES[S.SPECIAL] = _pose(knee=((-8, 24), (12, 26)), foot=((-18, 0), (16, 0)), elbow=((24, 76), (22, 72)),
                         hand=((46, 80), (44, 76)))  # fmt: skip
POSES[S.HITSTUN] = _pose(neck=(-12, 80), head=(-18, 87), elbow=((-4, 86), (-22, 76)),
                         hand=((4, 98), (-32, 86)), knee=((-2, 26), (8, 24)))  # fmt: skip
POSES[S.KO] = _pose(hip=(-30, 6), neck=(-64, 6), head=(-74, 7), knee=((-6, 10), (-10, 4)),
                    foot=((8, 0), (12, 0)), elbow=((-50, 14), (-46, 2)),
                    hand=((-38, 20), (-34, 0)))  # fmt: skip


class Canvas:
    """An RGB image with the few primitives a frame needs: rectangles, thick lines, discs."""

    def __init__(self, height: int, width: int) -> None:
        self.img = np.zeros((height, width, 3), dtype=np.uint8)
        self.ys, self.xs = _grid(height, width)

    def rect(self, x0: float, y0: float, x1: float, y1: float, color: RGB) -> None:
        h, w = self.img.shape[:2]
        a, b = int(np.clip(round(x0), 0, w)), int(np.clip(round(x1), 0, w))
        c, d = int(np.clip(round(y0), 0, h)), int(np.clip(round(y1), 0, h))
        self.img[c:d, a:b] = color

    def disc(self, x: float, y: float, r: float, color: RGB) -> None:
        h, w = self.img.shape[:2]
        x0, x1 = max(0, int(x - r - 1)), min(w, int(x + r + 2))
        y0, y1 = max(0, int(y - r - 1)), min(h, int(y + r + 2))
        if x0 >= x1 or y0 >= y1:
            return
        mask = (self.xs[y0:y1, x0:x1] - x) ** 2 + (self.ys[y0:y1, x0:x1] - y) ** 2 <= r * r
        self.img[y0:y1, x0:x1][mask] = color

    def line(self, a: Point, b: Point, width: float, color: RGB) -> None:
        """A thick segment with round ends: every pixel within width/2 of it."""
        (ax, ay), (bx, by) = a, b
        r = width / 2
        h, w = self.img.shape[:2]
        x0, x1 = max(0, int(min(ax, bx) - r - 1)), min(w, int(max(ax, bx) + r + 2))
        y0, y1 = max(0, int(min(ay, by) - r - 1)), min(h, int(max(ay, by) + r + 2))
        if x0 >= x1 or y0 >= y1:
            return
        px, py = self.xs[y0:y1, x0:x1] - ax, self.ys[y0:y1, x0:x1] - ay
        dx, dy = bx - ax, by - ay
        t = np.clip((px * dx + py * dy) / max(dx * dx + dy * dy, 1e-9), 0.0, 1.0)
        mask = (px - t * dx) ** 2 + (py - t * dy) ** 2 <= r * r
        self.img[y0:y1, x0:x1][mask] = color


@functools.lru_cache(maxsize=8)
def _grid(height: int, width: int) -> tuple[np.ndarray, np.ndarray]:
    """Each pixel's row and column (read-only: every frame of a size shares them)."""
    ys, xs = np.mgrid[0:height, 0:width]
    ys.setflags(write=False)
    xs.setflags(write=False)
    return ys, xs


@functools.lru_cache(maxsize=8)
def _background(height: int, width: int, floor: int) -> np.ndarray:
    """The stage, drawn once a size (read-only): a third of a frame's drawing when drawn each frame."""
    canvas = Canvas(height, width)
    _stage(canvas, floor)
    canvas.img.setflags(write=False)
    return canvas.img


def _stage(canvas: Canvas, floor: int) -> None:
    h, w = canvas.img.shape[:2]
    rows = np.linspace(0.0, 1.0, floor)[:, None]
    canvas.img[:floor] = ((1 - rows) * np.array(SKY_TOP) + rows * np.array(SKY_LOW))[:, None, :].astype(
        np.uint8
    )
    hills = floor - h * (0.12 + 0.07 * np.sin(np.arange(w) / w * 8 * 1.7))
    canvas.img[(canvas.ys >= hills[None, :]) & (canvas.ys < floor)] = HILLS
    ground = np.linspace(0.0, 1.0, h - floor)[:, None]
    canvas.img[floor:] = ((1 - ground) * np.array(FLOOR_TOP) + ground * np.array(FLOOR_LOW))[
        :, None, :
    ].astype(np.uint8)


def _fighter(
    canvas: Canvas, f: dict[str, Any], color: RGB, left: float, scale: float, floor: float, height: float
) -> Point:
    """Draw one fighter; returns where its blow lands (front hand, or front foot when kicking)."""
    pose = POSES.get(int(f["state"]), POSES[S.IDLE])
    ox, oy = left + f["x"] * scale, floor - f["y"] * scale
    facing = 1 if f["facing"] >= 0 else -1
    falls_at = ox - facing * 0.8 * height
    if int(f["state"]) == S.KO and not 0 <= falls_at <= canvas.img.shape[1]:
        facing = -facing  # knocked out against a wall, a fighter falls away from it (as the page)

    def at(p: Point) -> Point:
        return (ox + facing * p[0] * height / 100, oy - p[1] * height / 100)

    width = max(2.0, height * 0.075)
    canvas.rect(ox - height * 0.2, floor + 1, ox + height * 0.2, floor + 4, (40, 30, 24))  # shadow
    for side in (0, 1):
        canvas.line(at(pose["hip"]), at(pose["knee"][side]), width, color)
        canvas.line(at(pose["knee"][side]), at(pose["foot"][side]), width, color)
        canvas.line(at(pose["neck"]), at(pose["elbow"][side]), width, color)
        canvas.line(at(pose["elbow"][side]), at(pose["hand"][side]), width, color)
    canvas.line(at(pose["hip"]), at(pose["neck"]), width * 1.5, color)
    head = at(pose["head"])
    canvas.disc(head[0], head[1], height * 0.085, color)
    if int(f["state"]) == S.SPECIAL:
        hand = at(pose["hand"][0])
        canvas.disc(hand[0], hand[1], height * 0.12, (255, 90, 240))
        canvas.disc(hand[0], hand[1], height * 0.06, SPARK)
    return at(pose["foot"][1]) if int(f["state"]) == S.KICK else at(pose["hand"][0])


def _health(
    canvas: Canvas, x: float, y: float, w: float, h: float, hp: int, max_hp: int, right: bool
) -> None:
    canvas.rect(x - 1, y - 1, x + w + 1, y + h + 1, (0, 0, 0))
    canvas.rect(x, y, x + w, y + h, HP_LOST)
    fill = w * hp / max_hp
    color = HP if hp / max_hp > 0.3 else HP_LOW
    canvas.rect(x + w - fill if right else x, y, x + w if right else x + fill, y + h, color)


def draw(C: dict[str, Any], g: dict[str, Any], height: int = 200, width: int = 400) -> np.ndarray:
    """One frame (height, width, 3) uint8 of game `g`: the agent blue, its opponent red, a spark
    where a blow landed this step, a band of the winner's colour once the round is over."""
    canvas = Canvas(height, width)
    floor = int(height * 0.84)
    canvas.img[:] = _background(height, width, floor)
    tall = height * 0.36
    margin = min(width * 0.1, tall * 0.35)  # as the page: a fighter against a wall is drawn whole
    scale = (width - 2 * margin) / C["stage_width"]
    blows = [_fighter(canvas, f, COLORS[i], margin, scale, floor, tall) for i, f in enumerate(g["fighters"])]
    for i, dealt in enumerate(g.get("dealt", (0, 0))):
        if dealt > 0 and ATTACK_OF_STATE.get(int(g["fighters"][i]["state"])):
            x, y = blows[i]
            r = height * (0.03 + dealt / 300)
            canvas.line((x - r, y), (x + r, y), max(2.0, r / 2.5), SPARK)
            canvas.line((x, y - r), (x, y + r), max(2.0, r / 2.5), SPARK)
    bar_w, bar_h = width * 0.38, max(5.0, height * 0.045)
    _health(canvas, width * 0.03, height * 0.04, bar_w, bar_h, g["fighters"][0]["hp"], C["max_hp"], False)
    _health(
        canvas, width * 0.97 - bar_w, height * 0.04, bar_w, bar_h, g["fighters"][1]["hp"], C["max_hp"], True
    )
    # The round's time left as a bar between the health bars (no fonts in numpy).
    left = max(0.0, 1.0 - g["frame"] / C["round_frames"])
    canvas.rect(width * 0.45, height * 0.04, width * 0.45 + width * 0.1 * left, height * 0.04 + bar_h, WHITE)
    if g["done"]:
        winner = int(g["winner"])
        band = COLORS[winner] if winner in (0, 1) else (200, 200, 200)
        canvas.rect(0, height * 0.44, width, height * 0.52, band)
    return canvas.img
