# `python -m recipes.trial ...`: the same entry point as the built single file.
import sys

from .cli import main

sys.exit(main())
