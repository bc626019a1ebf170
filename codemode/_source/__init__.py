"""JavaScript source transforms, all pure Python, applied on the host before a run starts.

* ``normalize.py``: what a model wrote (a bare body, a function declaration, a fenced
  block, TypeScript) turned into the function expression a run calls; public as
  :func:`codemode.normalize_code`.
* ``typestrip.py``: TypeScript's type syntax replaced by spaces, lines and columns kept.
* The module loader: ``module_map.py`` validates the ``modules`` field, ``transform.py``
  rewrites the program's ``import()`` and transforms each module (``esm.py``, ``cjs.py``,
  over ``syntax.py`` and ``edits.py``; ``transformed.py`` is their output), and ``bundle.py``
  builds the one bundle the isolate evaluates, around ``loader.js``.

Nothing is imported here: each caller imports the module it needs, so importing one does
not load tree-sitter for another.
"""
