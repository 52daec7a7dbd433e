"""``python -m rlpipe`` (and ``torchrun -m rlpipe``) runs the CLI."""

from rlpipe.cli import main

main()
