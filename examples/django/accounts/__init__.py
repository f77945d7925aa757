"""Members who signed up, and the welcome emails the jobs wrote for them."""
