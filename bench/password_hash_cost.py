"""How long one password hash or check takes: the figure rules/llm004.yaml and the README quote for bcrypt.

    python bench/password_hash_cost.py [--repeat 20]

Needs bcrypt (not a dependency of llmdoctor: `pip install bcrypt`). Each figure is the median of `--repeat`
calls at bcrypt's default cost (`bcrypt.gensalt()`: 12 rounds), in a process that has already made one: the time
an `async def` login handler holds its event loop when it calls them there.
"""

from __future__ import annotations

import sys

from client_build_cost import median_ms, start


def main() -> int:
    started = start(__doc__, "calls", "bcrypt")
    if started is None:
        return 2
    repeat, bcrypt = started
    salt = bcrypt.gensalt()
    stored = bcrypt.hashpw(b"correct horse", salt)
    print(f"bcrypt {bcrypt.__version__}, cost {salt.decode()[4:6]}, median of {repeat}")
    cases = {
        "bcrypt.hashpw(password, gensalt())": lambda: bcrypt.hashpw(b"correct horse", bcrypt.gensalt()),
        "bcrypt.checkpw(password, stored)": lambda: bcrypt.checkpw(b"correct horse", stored),
    }
    for name, call in cases.items():
        print(f"  {name:40s} {median_ms(call, repeat):7.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
