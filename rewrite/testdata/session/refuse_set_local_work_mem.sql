-- intent: a setting off the allowlist (work_mem) is refused, even as SET LOCAL
SET LOCAL work_mem = '1GB'
