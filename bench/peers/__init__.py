"""The peers' jobs and enqueue functions, imported only inside bench/.peers-venv."""
