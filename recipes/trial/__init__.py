# The trial recipe: a short real fine-tuning run that measures what the `sizing` estimate predicts.
"""The trial recipe as a package; `python -m recipes.build OUT.py` ships it as the single file trial.py."""

SCHEMA_VERSION = 1
