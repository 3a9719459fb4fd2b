"""`python -m forgeml.cli ...`: the CLI, as the scheduler starts it inside a job."""

from forgeml.cli import main

main()
