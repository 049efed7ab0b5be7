"""What the jobs put on top of BertModel: task heads, losses, and task-specific models (docs/architecture.md
lists the files). The heads and losses every job shares and sentence pooling are lesson files,
minbert/task_heads.py and minbert/pooling.py.

Read next: course_task.py.
"""
