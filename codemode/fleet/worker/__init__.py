"""The fleet's worker side: the Celery worker process that runs jobs on its own isolate pool.

::

    cli.py         ``codemode worker``: flags, settings, Redis answering, then Celery
    app.py         create_app(): the Celery app, its start and stop, jobs_at_once
    tasks.py       the execute and ping tasks
    canvas.py      ``codemode.run``: canvas jobs (chains, groups, chords), tools and retries
    strategy.py    the execute task's hand-off from Celery's consumer to the runtime
    runtime.py     the process's event loop thread, isolate pool and Redis client
    runner.py      JobRunner: what outlives one job (leases, handles, liveness keys)
    job.py         one job: claim, run, outcome
    relay.py       one job's calls up its reply channel and the host's replies
    reader.py      the reader of a job's down channel
    leases.py      the running jobs' leases, renewed from a thread of its own
    handles.py     retained handles: the worker's table and the route to the serving job
    transport.py   kombu's Redis transport as the fleet runs it (no message stops a consumer)
    deadletter.py  <queue>.dead: the messages a worker could not take, with their reasons
    redis_wait.py  before a worker starts: does Redis answer?

Importing this package loads neither Celery nor the runtime: ``cli.py`` says what is
missing when the fleet extra is not installed.
"""
