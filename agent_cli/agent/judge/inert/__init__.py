"""Which commands exit 0 whatever the repository holds (programs), with Python code given
with `-c` (python_code) and `sh -c` scripts read into a tree (shell_parse) and followed on
statuses (shell_status)."""
