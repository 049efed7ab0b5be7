"""The machinery every job shares: one training loop and what surrounds it, in a few rooms.

    flags.py       the command line: settings declared as dataclass fields that are flags, checked types
    settings.py    the settings every job shares: TrainingSettings (the loop), JobSettings (model and data),
                   and the run's real ones decided (threads, precision, attention kernel)
    loop.py        the loop: task sampling, steps, AdamW and its schedule, evaluation, progress lines
    run_folder.py  the run's folder: config.json, metrics, the plot, the resumable state, best/, and Ctrl-C
                   and SIGTERM (stop at a step boundary, saved)
    distributed.py data parallelism under torchrun
    job.py         a job's set-up, written once: settings parsed and resolved, JobRun (the run folder claimed,
                   the encoder, the loop, best/ reloaded), one-line errors, the course's file flags, --seeds

Read next: loop.py.
"""
