# `python -m sizing ...`
from .cli import main

raise SystemExit(main())
