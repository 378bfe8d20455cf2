"""`python -m framework [plugins | Hydra overrides...]`."""

import sys


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "plugins":
        from framework.plugins_cli import main as plugins_main

        sys.exit(plugins_main(sys.argv[2:]))
    from framework.app import main as app_main

    app_main()


if __name__ == "__main__":
    main()
