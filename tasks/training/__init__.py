"""The machinery every job shares: one training loop and what surrounds it.

    settings.py     settings declared once: dataclass fields that are also flags, read back from config.json
    arguments.py    argument types that check a flag's value where argparse reads it
    config.py       the settings every job shares: TrainConfig (the loop's), JobSettings (model and data)
    loop.py         the loop: task sampling, steps, evaluation, best checkpoint
    precision.py    fp32, or bf16 autocast where the hardware multiplies it natively (--precision)
    threads.py      how many CPU threads: --threads, or the cores idle when the job starts
    progress.py     plain progress lines where no progress bar can be drawn (logs)
    optimizer.py    our AdamW over encoder and heads, the learning-rate schedule
    run_dir.py      the run directory, its config.json, and the resumable training state
    interrupt.py    Ctrl-C and SIGTERM: stop at the next step boundary, saved, and say how to continue
    job.py          around the loop: the course's file flags, the encoder, one-line errors
    best_model.py   head checkpoints: best/ saved and loaded back, a run's saved head settings
    seeds.py        several seeds of one run (--seeds), mean and standard deviation
    distributed.py  data parallelism under torchrun

Read next: loop.py.
"""
