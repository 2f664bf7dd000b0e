"""Entry point for `python -m agent_cli`."""

from agent_cli.cli.app import main

if __name__ == "__main__":
    main()
