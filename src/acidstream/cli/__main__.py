"""``python -m acidstream.cli``: the same command as the ``acidstream`` script."""

from acidstream.cli import main

main()
