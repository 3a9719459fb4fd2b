"""`python _detach.py LOG_FILE CWD COMMAND...`: start COMMAND in its own session; print its pid.

Run by path (only the standard library loads). The command's stdout and stderr are
appended to LOG_FILE, its stdin is empty, and CWD (when not '') is its directory. This
script exits at once, so the command is not the caller's child: it outlives the caller
and never lingers as the caller's zombie.
"""

import subprocess
import sys

if __name__ == "__main__":
    log_file, cwd, *command = sys.argv[1:]
    with open(log_file, "ab") as log:
        child = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=cwd or None,
            start_new_session=True,
        )
    sys.stdout.write(f"{child.pid}\n")
