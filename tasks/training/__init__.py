"""The machinery every job shares: one training loop and what surrounds it.

    config.py       TrainConfig and the training flags every job has
    arguments.py    argument types that check a flag's range where argparse reads it
    loop.py         the loop: task sampling, steps, evaluation, best checkpoint
    precision.py    fp32, or bf16 autocast where the hardware multiplies it natively (--precision)
    threads.py      how many CPU threads: --threads, or the cores idle when the job starts
    progress.py     plain progress lines where no progress bar can be drawn (logs)
    optimizer.py    our AdamW over encoder and heads, the learning-rate schedule
    run_dir.py      the run directory and the resumable training state
    job.py          around the loop: job flags, the encoder, data, checkpoints, predictions, one-line errors
    course_files.py the course starter's file flags (--sst_train ... --sts_test_out), a run's saved settings
    seeds.py        several seeds of one run, mean and standard deviation
    distributed.py  data parallelism under torchrun

Read next: loop.py.
"""
