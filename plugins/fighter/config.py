"""The fighter env plugin's config schema: every key, its default and its description."""

# Optional[...] and List[...] in schemas: OmegaConf 2.3 cannot read PEP 604 unions.
from dataclasses import dataclass, field
from typing import List

from framework.values import SHOWN, bounds
from framework_plugins.web.host import HOST

TRANSPORTS = ("inprocess", "python", "browser")
SIGNALING = ("builtin", "peerjs")


@dataclass
class FighterConfig:
    opponent: str = "aggressive"
    """Scripted opponent: idle, random, aggressive or defensive."""
    eval_opponents: List[str] = field(
        default_factory=lambda: ["random", "aggressive", "defensive"], metadata=SHOWN
    )  # how the run is measured, as eval.* is: not what it trains
    """Opponents every evaluation plays on the in-process twin, eval.episodes rounds each, logged as
    eval/<opponent>/win_rate etc. and pooled as eval/win_rate etc.; [] plays env.opponent only."""
    transport: str = "browser"
    """Where the game runs: browser (the JavaScript game page over WebRTC), python (the twin behind
    an aiortc peer: WebRTC without a browser) or inprocess (the Python twin, no network)."""
    headless: bool = field(default=False, metadata=SHOWN)
    """browser transport: false prints the page's URL and opens your browser (evaluation then plays
    on the in-process twin, so only one page is yours to watch); true launches a headless Chromium."""
    pin_chromium: bool = field(default=True, metadata=SHOWN)
    """browser transport, headless=true: run Chromium on one CPU (of those the trainer may use, the
    highest-numbered; each further Chromium of the run on another where there is one). A message
    crosses several of Chromium's threads each way, cheaply on one CPU: one arena steps ~1.2x
    faster on 2 cores. false: Chromium runs on every CPU."""
    open_browser: bool = field(default=True, metadata=SHOWN)
    """browser transport, headless=false: open the page in your browser (false: only print its
    address, e.g. to open it on another screen; it is printed either way)."""
    host: str = field(default="127.0.0.1", metadata={**HOST, **SHOWN})
    """Address the game page and its signaling endpoint are served on."""
    port: int = field(default=0, metadata={**bounds(ge=0, le=65535), **SHOWN})
    """Port of the first training env's page (0: any free port); others take free ports."""
    signaling: str = "builtin"
    """How the game client reaches the trainer: builtin (the page server's offer/answer endpoint) or
    peerjs (through the PeerJS server at peerjs_url, with PeerJS ids, as PeerJS pages do)."""
    peerjs_url: str = field(default="http://127.0.0.1:9000/", metadata=SHOWN)
    """signaling=peerjs: the PeerJS server (`npx peer --port 9000`), http://HOST:PORT/PATH."""
    peerjs_key: str = field(default="peerjs", metadata=SHOWN)
    """signaling=peerjs: the PeerJS server's --key."""
    connect_timeout_s: float = field(default=120.0, metadata={**bounds(gt=0), **SHOWN})
    """Longest wait for the game client to connect, and for your page to come back after it was
    lost (a client the trainer started itself, the Python peer or a headless Chromium, is
    started anew at once instead)."""
    step_timeout_s: float = field(default=10.0, metadata={**bounds(gt=0), **SHOWN})
    """Longest wait for the game's answer to one step."""
    heartbeat_timeout_s: float = field(default=2.0, metadata={**bounds(gt=0), **SHOWN})
    """A game client silent for this long is declared gone."""
    reconnect: bool = True
    """After the client was lost, truncate the round and go on with a new one (false: stop the run)."""
    n_envs: int = field(default=1, metadata=bounds(ge=1))
    """Parallel game instances an agent trains on."""
    damage_reward: float = field(default=1.0, metadata=bounds())
    """Reward per full health bar of damage dealt (and penalty per bar taken)."""
    win_reward: float = field(default=1.0, metadata=bounds())
    """Bonus for winning the round (its negative for losing; 0 for a draw)."""
