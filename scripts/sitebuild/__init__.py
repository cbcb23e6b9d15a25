# The site build: what scripts/hooks.py calls, as small pure modules (imported as `sitebuild.x`).
"""Page numbers (sizing_blocks), the calculator pages and their Pyodide runtime, and what spans pages
(Markdown copies, llms.txt, sitemap, hreflang, JSON-LD, the OpenGraph image)."""
