"""``manage.py jobrun_worker`` and ``manage.py jobrun_migrate``."""
