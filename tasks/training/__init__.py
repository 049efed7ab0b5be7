"""The machinery every job shares: one training loop and what hangs off it, in a few rooms.

    loop.py         the loop: a batch, its loss, backward, the step; the schedule, evaluation, progress, plot
    settings.py     the settings every job shares, as frozen dataclasses whose fields are the flags; their
                    parser; the optimizers (OPTIMIZERS); the run's real settings, decided once
    flags.py        the checked types of the flags' values
    job.py          a job's run written once (JobRun: the folder, the encoder, the fast paths, the optimizer,
                    the loop, best/ back), --lora's adapters, one-line errors
    run_folder.py   the run's folder: claimed, locked, and its records (config.json, run.json, inputs.json,
                    metrics.jsonl), each read back through its schema
    checkpoints.py  what a run saves: the resume state (checkpoints/last.pt) and best/
    process.py      this process and its machine: the fast paths, threads, precision and attention kernel;
                    alone or one of torchrun's; Ctrl-C and SIGTERM
    seeds.py        --seeds: one run per seed, their mean ± std

Read next: loop.py.
"""
