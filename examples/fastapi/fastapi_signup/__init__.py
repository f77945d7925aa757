"""A signup service on FastAPI that enqueues its welcome email in the signup's transaction."""
