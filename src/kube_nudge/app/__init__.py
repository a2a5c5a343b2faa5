"""The application: command line, assembly of the runnables, logging set-up."""
