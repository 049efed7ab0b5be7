"""Further pre-training (masked LM, next sentence) on task or domain text: `python -m pretrain.run`."""

from tasks import stop_in_one_line_outside_the_run

stop_in_one_line_outside_the_run()  # a Ctrl-C while pretrain.run imports torch: one line, as the tasks' jobs
