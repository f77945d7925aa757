"""Django management commands of jobrun's app: ``jobrun_worker``, ``jobrun_migrate``."""
