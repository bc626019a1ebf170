"""The codemode Celery worker: the app, the execute task, and the command that starts it.

Start a worker (one command; ``codemode worker`` calls the same ``main``)::

    CODEMODE_REDIS_URL=redis://localhost:6379/0 python -m workers --concurrency 2
"""
