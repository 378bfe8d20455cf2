"""A sweep's search space as people write it from other tools: Optuna's and Ray Tune's function names
(uniform, loguniform, randint), a mapping given on the command line, a database URL SQLAlchemy spells
otherwise. Each is named with what Hydra and this sweeper take, or taken as meant."""

from __future__ import annotations

import pytest

from framework.errors import ConfigError


@pytest.mark.parametrize(
    ("override", "said"),
    [
        ("lr=uniform(1e-5,1e-2)", "uniform() is not a function of Hydra's override grammar. For uniform, "
         "write interval(LOW,HIGH)."),
        ("lr=logUniform(1e-5,1e-2)", "For logUniform, write tag(log,interval(LOW,HIGH))."),
        ("lr=chioce(1,2)", "chioce() is not a function of Hydra's override grammar. Did you mean choice?"),
    ],
)  # fmt: skip
def test_another_librarys_sweep_function_is_named_with_hydras_own(override: str, said: str) -> None:
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import OverrideParseException

    from framework.hydra_errors import hydra_message

    with pytest.raises(OverrideParseException) as refused:
        OverridesParser.create().parse_overrides([override])
    message = hydra_message(refused.value)
    assert message is not None and message.startswith(f"{override}: ") and said in message, message
    assert message.endswith("tag(log,interval(LOW,HIGH)) for a log scale"), message


def test_a_storage_url_of_a_database_sqlalchemy_lacks_is_named_with_the_close_one() -> None:
    from framework.errors import ConfigError
    from hydra_plugins.framework_optuna_sweeper._study import open_storage

    with pytest.raises(ConfigError) as refused:
        open_storage("postgres://nohost/db")
    assert str(refused.value).startswith("hydra.sweeper.storage=postgres://nohost/db: SQLAlchemy has no ")
    assert str(refused.value).endswith("Did you mean postgresql://?")


def test_a_search_space_mapping_on_the_command_line_is_its_keys_overrides() -> None:
    """Hydra cannot merge a mapping given on the command line into hydra.sweeper.params (a traceback):
    each of its keys becomes the override that sweeps it, as the search space is written there."""
    from hydra_plugins.framework_optuna_sweeper.command_line import expand

    line = [
        "-m",
        "hydra/sweeper=optuna",
        "hydra.sweeper.params={agent.gamma:'interval(0.9,0.99)',seed:'choice(1,2)'}",
    ]
    assert expand(line) == [
        "-m",
        "hydra/sweeper=optuna",
        "agent.gamma=interval(0.9,0.99)",
        "seed=choice(1,2)",
    ]
    assert expand(["+hydra.sweeper.params.agent.gamma=interval(0.9,0.99)"]) == [
        "agent.gamma=interval(0.9,0.99)"
    ]
    assert expand(["agent.gamma=0.9", "hydra.sweeper.n_trials=2"]) == [
        "agent.gamma=0.9",
        "hydra.sweeper.n_trials=2",
    ]
    with pytest.raises(ConfigError, match=r"hydra\.sweeper\.params=5: a mapping of each swept key"):
        expand(["hydra.sweeper.params=5"])
