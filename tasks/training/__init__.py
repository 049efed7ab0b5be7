"""The machinery every job shares: one training loop and what surrounds it, in a few rooms.

    flags.py       the command line: settings declared as dataclass fields that are flags, checked types
    settings.py    the settings every job shares: TrainingSettings (the loop), JobSettings (model and data),
                   and the run's real ones decided (threads, precision, attention kernel)
    loop.py        the loop: task sampling, steps, evaluation, progress lines
    optimizer.py   AdamW over parameter groups (encoder, heads) and the --schedule
    run_folder.py  the run's folder: claimed, locked, and its records (config.json, run.json, inputs.json)
    checkpoints.py the resume state (checkpoints/last.pt)
    best.py        best/: the best epoch's model saved, verified and loaded back
    signals.py     Ctrl-C and SIGTERM (stop at a step boundary, saved)
    plot.py        loss_and_dev.png
    world.py       where a process stands: alone, or one of torchrun's
    distributed.py data parallelism under torchrun (loaded only then)
    lora_run.py    --lora (loaded only then): adapters on the encoder, best/ as peft's adapter folder
    job.py         a job's set-up, written once: settings parsed and resolved, JobRun (the run folder claimed,
                   the encoder, the loop, best/ reloaded), one-line errors, the course's file flags
    seeds.py       --seeds: one run per seed, their mean ± std summarised

Read next: loop.py.
"""
