# Runnable recipes shipped with the site; each is built into one downloadable file (recipes/build.py).
